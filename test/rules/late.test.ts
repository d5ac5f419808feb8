// Late readings (SPEC §5): stored, included in the recomputed summary, may add a break, and
// never retract what was already sent.
import { describe, expect, it } from 'vitest'
import { builtInProfiles, checkSilence, evaluate, recompute, replay, summarize, type Reading } from '../../rules/index.js'
import { at, BOUND_AT, everyMinute, iso } from './helpers.js'

const fridge = builtInProfiles.refrigerated
const byTs = (a: Reading, b: Reading) => a.ts - b.ts

describe('recompute', () => {
  it('a late hard-limit reading adds the break and shows in the summary', () => {
    const live = replay(fridge, BOUND_AT, everyMinute(0, 30, 5)).state
    const late = { ts: at(12.5), temp_c: -1 }
    const all = [...everyMinute(0, 30, 5), late].sort(byTs)

    const { state, events } = recompute(live, fridge, all)

    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({ type: 'cold-chain.break', key: 'break', at: at(12.5), data: { reason: 'hard_limit', temp_c: -1 } })
    expect(summarize(state)).toMatchObject({ state: 'BROKEN', min_c: -1, time_out_of_range_s: 30 })
    expect(summarize(live).state).toBe('OK') // the live state is left alone
  })

  it('keeps a break already announced, with its reason and time', () => {
    const live = initialBrokenBySilence()
    const all = [...everyMinute(0, 10, 5), { ts: at(20), temp_c: 5 }, { ts: at(40), temp_c: -2 }]
    const { state, events } = recompute(live, fridge, all)
    expect(events).toEqual([])
    expect(state.broken).toEqual(live.broken)
    expect(summarize(state).break).toEqual({ reason: 'sensor_gap', at: iso(55) })
  })

  it('replays only up to the last evaluated reading; newer ones are still in the reorder window', () => {
    const live = replay(fridge, BOUND_AT, everyMinute(0, 10, 5)).state
    const all = [...everyMinute(0, 10, 5), { ts: at(5.5), temp_c: 6 }, { ts: at(11), temp_c: -5 }].sort(byTs)
    const { state, events } = recompute(live, fridge, all)
    expect(events).toEqual([])
    expect(state.lastTs).toBe(at(10))
    // …and the newer reading is then evaluated normally.
    expect(evaluate(state, fridge, [{ ts: at(11), temp_c: -5 }]).events.map((e) => e.type)).toEqual(['cold-chain.break'])
  })

  it('announces an excursion the late readings reveal, so its recovery is not orphaned', () => {
    // Live saw 5 °C at minutes 0 and 10 only … (readings every 10 minutes, well within max_gap_s)
    const live = replay(fridge, BOUND_AT, [
      { ts: at(0), temp_c: 5 },
      { ts: at(10), temp_c: 9 },
      { ts: at(20), temp_c: 9 },
    ]).state
    // … a late 9 °C at minute 5 means the excursion began at minute 5, not 10.
    const all = [
      { ts: at(0), temp_c: 5 },
      { ts: at(5), temp_c: 9 },
      { ts: at(10), temp_c: 9 },
      { ts: at(20), temp_c: 9 },
    ]
    const { state, events } = recompute(live, fridge, all)
    expect(events).toEqual([expect.objectContaining({ type: 'temperature.excursion', key: `excursion:${at(5)}`, at: at(10) })])
    expect(summarize(state).excursions).toEqual([{ started_at: iso(5), ended_at: null, duration_s: 900, peak_c: 9, kind: 'high' }])
  })
})

/** Readings until minute 10, then silence: offline at 25, sensor_gap break at 55. */
function initialBrokenBySilence() {
  const { state } = replay(fridge, BOUND_AT, everyMinute(0, 10, 5))
  checkSilence(state, fridge, at(60))
  evaluate(state, fridge, [
    { ts: at(20), temp_c: 5 },
    { ts: at(40), temp_c: -2 },
  ])
  return state
}
