import { describe, expect, it } from 'vitest'
import { builtInProfiles, evaluate, initialColdChain as initialEngineState } from '../../rules/index.js'
import { coldChainFigures, coldChainFiguresSchema, initialColdChain, storedFigures } from '../../src/domain/cold-chain.js'

const strict = coldChainFiguresSchema.strict()
const fridge = builtInProfiles.refrigerated

describe("the delivery's cold_chain figures", () => {
  it('start as the schema documents them, with or without a cold chain', () => {
    expect(strict.parse(initialColdChain(true))).toMatchObject({ state: 'OK', unknown_s: 0, broken_at: null })
    expect(strict.parse(initialColdChain(false))).toMatchObject({ state: 'UNMONITORED' })
  })

  it('are stored from the rule engine exactly as the schema documents them, break included', () => {
    const { state } = evaluate(initialEngineState(fridge, 0), fridge, [
      { ts: 0, temp_c: 5 },
      { ts: 60_000, temp_c: -1 },
    ])
    const figures = coldChainFigures(state)
    expect(strict.parse(figures)).toEqual(figures)
    expect(figures).toMatchObject({ state: 'BROKEN', break_reason: 'hard_limit', broken_at: '1970-01-01T00:01:00.000Z' })
  })

  it('fill in members that figures stored before them lack', () => {
    const { unknown_s: _, broken_at: __, ...older } = initialColdChain(true)
    expect(storedFigures(true, older)).toEqual(initialColdChain(true))
  })
})
