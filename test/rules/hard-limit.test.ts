// A reading past a hard limit is judged on arrival, not after the reorder window (rules/hard-limit.ts).
import { describe, expect, it } from 'vitest'
import {
  breakOnArrival,
  builtInProfiles,
  evaluate,
  initialColdChain,
  ReorderBuffer,
  replay,
  summarize,
  type Reading,
  type RuleEvent,
} from '../../rules/index.js'
import { at, BOUND_AT } from './helpers.js'

const fridge = builtInProfiles.refrigerated // 2–8 °C, hard_min_c 0, max_excursion_s 1800
const WINDOW_MS = 30_000

/** The service's order of work for one arriving reading: release what the window lets go, then judge a hard limit at once. */
function arrive(
  live: { state: ReturnType<typeof initialColdChain>; buffer: ReorderBuffer<Reading>; events: RuleEvent[] },
  r: Reading,
  now: number,
) {
  evaluate(live.state, fridge, live.buffer.push(r, now).released, live.events)
  breakOnArrival(live.state, fridge, r, live.buffer.held(), live.events)
}

function start() {
  return { state: initialColdChain(fridge, BOUND_AT), buffer: new ReorderBuffer<Reading>(WINDOW_MS), events: [] as RuleEvent[] }
}

describe('hard limits on arrival', () => {
  it('a freeze reading breaks the cold chain while the window still holds it', () => {
    const live = start()
    arrive(live, { ts: at(1), temp_c: 5 }, at(1))
    arrive(live, { ts: at(1) + 10_000, temp_c: -1.5 }, at(1) + 10_000)
    expect(live.buffer.size).toBe(2) // nothing released yet: the window has not elapsed
    expect(live.events).toHaveLength(1)
    expect(live.events[0]).toMatchObject({
      type: 'cold-chain.break',
      at: at(1) + 10_000,
      data: { reason: 'hard_limit', threshold: 'hard_min_c', temp_c: -1.5 },
    })
    expect(summarize(live.state).state).toBe('BROKEN')
    // The readings still get evaluated when the window lets them go, and the break is not raised again.
    evaluate(live.state, fridge, live.buffer.flushAll(), live.events)
    expect(live.events.filter((e) => e.type === 'cold-chain.break')).toHaveLength(1)
    expect(live.state.min_c).toBe(-1.5)
  })

  it('the break is what the window would have raised from the readings that had arrived, figures included', () => {
    const readings: Reading[] = [
      { ts: at(0), temp_c: 5 },
      { ts: at(10), temp_c: 9 },
      { ts: at(40), temp_c: 9.5 }, // out of range since minute 10: excursion_too_long at minute 40
      { ts: at(41), temp_c: -1 },
    ]
    const live = start()
    for (const r of readings) arrive(live, r, r.ts + 1_000) // all arrive in order, within the window
    const inOrder = replay(fridge, BOUND_AT, readings).events.find((e) => e.type === 'cold-chain.break')!
    expect(inOrder.data.reason).toBe('excursion_too_long')
    expect(live.events.find((e) => e.type === 'cold-chain.break')).toEqual(inOrder)
  })

  it('a reading that arrives afterwards, earlier in event time, neither retracts the break nor raises a second', () => {
    const live = start()
    arrive(live, { ts: at(0), temp_c: 5 }, at(0))
    arrive(live, { ts: at(3), temp_c: -1 }, at(3)) // breaks: hard_limit at minute 3
    // A gateway delivers an older freeze reading, inside the window: in event-time order it would have broken first.
    arrive(live, { ts: at(3) - 20_000, temp_c: -4 }, at(3) + 1_000)
    evaluate(live.state, fridge, live.buffer.flushAll(), live.events)
    const breaks = live.events.filter((e) => e.type === 'cold-chain.break')
    expect(breaks).toHaveLength(1)
    expect(breaks[0]).toMatchObject({ at: at(3), data: { reason: 'hard_limit', temp_c: -1 } })
    expect(live.state.broken).toEqual({ reason: 'hard_limit', at: at(3) })
    // Every figure is that of all the readings, in event-time order.
    expect(live.state.min_c).toBe(-4)
    expect(live.state.lastTs).toBe(at(3))
  })

  it('an in-range or merely out-of-range reading waits for the window as before', () => {
    const live = start()
    arrive(live, { ts: at(0), temp_c: 5 }, at(0))
    arrive(live, { ts: at(1), temp_c: 0.5 }, at(1)) // below 2 °C but above the hard minimum
    expect(live.events).toEqual([])
    expect(live.state.broken).toBeNull()
  })
})
