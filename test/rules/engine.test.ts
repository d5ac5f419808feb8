// Behaviour of the cold-chain rules (SPEC §5) on the refrigerated profile: 2–8 °C, grace 5 min,
// one excursion ≤ 30 min, 60 min out of range per delivery, hard minimum 0 °C, MKT ≤ 8 °C,
// sensor gaps after 15 min.
import { describe, expect, it } from 'vitest'
import { builtInProfiles, evaluate, initialColdChain, replay, resolveProfile, summarize, type RuleEvent } from '../../rules/index.js'
import { at, BOUND_AT, everyMinute, iso, readings } from './helpers.js'

const fridge = builtInProfiles.refrigerated
const room = builtInProfiles.controlled_room

const types = (events: RuleEvent[]) => events.map((e) => `${e.type}@${(e.at - BOUND_AT) / 60_000}`)
const breaks = (events: RuleEvent[]) => events.filter((e) => e.type === 'cold-chain.break')

describe('in range', () => {
  it('emits nothing and reports OK', () => {
    const { state, events } = replay(fridge, BOUND_AT, everyMinute(0, 60, 5))
    expect(events).toEqual([])
    expect(summarize(state)).toMatchObject({ state: 'OK', min_c: 5, max_c: 5, mkt_c: 5, time_out_of_range_s: 0, excursions: [] })
  })

  it('includes both limits (2 °C and 8 °C are in range)', () => {
    const { state } = replay(fridge, BOUND_AT, [...everyMinute(0, 10, 2), ...everyMinute(11, 20, 8)])
    expect(summarize(state).time_out_of_range_s).toBe(0)
  })
})

describe('grace', () => {
  it('a blip shorter than grace is no excursion, but its time counts against the budget', () => {
    const { state, events } = replay(fridge, BOUND_AT, [...everyMinute(0, 9, 5), ...everyMinute(10, 13, 9), ...everyMinute(14, 20, 5)])
    expect(events).toEqual([])
    expect(summarize(state)).toMatchObject({ state: 'OK', max_c: 9, time_out_of_range_s: 240, excursions: [] })
  })

  it('exactly grace_s out of range is still no excursion ("longer than")', () => {
    const { events } = replay(fridge, BOUND_AT, readings([0, 5], [10, 9], [15, 5]))
    expect(events).toEqual([])
  })

  it('past grace, the excursion is announced once, dated at start + grace', () => {
    const { state, events } = replay(fridge, BOUND_AT, [...everyMinute(0, 9, 5), ...everyMinute(10, 20, 9.5)])
    expect(events).toEqual([
      {
        type: 'temperature.excursion',
        key: `excursion:${at(10)}`,
        at: at(15),
        data: { excursion_started_at: iso(10), kind: 'high', peak_c: 9.5, min_c: 2, max_c: 8, grace_s: 300 },
      },
    ])
    expect(summarize(state)).toMatchObject({
      state: 'EXCURSION',
      excursions: [{ started_at: iso(10), ended_at: null, duration_s: 600, peak_c: 9.5, kind: 'high' }],
    })
  })

  it('a reading held past grace proves the excursion even without a reading in between', () => {
    const { events } = replay(fridge, BOUND_AT, readings([0, 1.5], [8, 5]))
    expect(types(events)).toEqual(['temperature.excursion@5', 'temperature.recovered@8'])
    expect(events[0]!.data).toMatchObject({ kind: 'low', peak_c: 1.5 })
  })
})

describe('recovery', () => {
  it('returning in range emits temperature.recovered with duration and peak', () => {
    const { state, events } = replay(fridge, BOUND_AT, [
      ...everyMinute(0, 9, 5),
      ...readings([10, 9], [12, 11.2], [14, 10], [17, 8]),
      ...everyMinute(18, 20, 6),
    ])
    expect(types(events)).toEqual(['temperature.excursion@15', 'temperature.recovered@17'])
    expect(events[1]).toEqual({
      type: 'temperature.recovered',
      key: `recovered:${at(10)}`,
      at: at(17),
      data: {
        excursion_started_at: iso(10),
        recovered_at: iso(17),
        duration_s: 420,
        kind: 'high',
        peak_c: 11.2,
        temp_c: 8,
        unknown_s: 0,
      },
    })
    expect(summarize(state)).toMatchObject({
      state: 'OK',
      time_out_of_range_s: 420,
      excursions: [{ started_at: iso(10), ended_at: iso(17), duration_s: 420, peak_c: 11.2, kind: 'high' }],
    })
  })

  it('treats each reading as holding until the next one (step function)', () => {
    const { state } = replay(fridge, BOUND_AT, readings([0, 9], [10, 5]))
    expect(summarize(state).time_out_of_range_s).toBe(600)
  })
})

describe('cold-chain.break', () => {
  it('hard_limit: any reading below hard_min_c breaks at once, even the first one', () => {
    const { state, events } = replay(fridge, BOUND_AT, readings([0, -0.5], [1, 4]))
    expect(breaks(events)).toEqual([
      {
        type: 'cold-chain.break',
        key: 'break',
        at: at(0),
        data: {
          reason: 'hard_limit',
          threshold: 'hard_min_c',
          limit: 0,
          broken_at: iso(0),
          temp_c: -0.5,
          excursion_started_at: iso(0),
          excursion_duration_s: 0,
          time_out_of_range_s: 0,
          unknown_s: 0,
          mkt_c: null,
          profile: 'refrigerated',
        },
      },
    ])
    expect(summarize(state)).toMatchObject({ state: 'BROKEN', break: { reason: 'hard_limit', at: iso(0) } })
  })

  it('hard_limit: exactly the hard limit is not beyond it', () => {
    const { events } = replay(fridge, BOUND_AT, readings([0, 0], [1, 4]))
    expect(breaks(events)).toEqual([])
  })

  it('hard_limit above: controlled room breaks past 30 °C', () => {
    const { events } = replay(room, BOUND_AT, readings([0, 22], [5, 30.5]))
    expect(breaks(events)[0]).toMatchObject({ at: at(5), data: { reason: 'hard_limit', threshold: 'hard_max_c', limit: 30, temp_c: 30.5 } })
  })

  it('excursion_too_long: one excursion longer than max_excursion_s breaks at start + max_excursion_s', () => {
    const { events } = replay(fridge, BOUND_AT, [...everyMinute(0, 59, 5), ...everyMinute(60, 95, 9)])
    expect(types(events)).toEqual(['temperature.excursion@65', 'cold-chain.break@90'])
    expect(events[1]!.data).toMatchObject({
      reason: 'excursion_too_long',
      threshold: 'max_excursion_s',
      limit: 1800,
      temp_c: 9,
      excursion_started_at: iso(60),
      excursion_duration_s: 1800,
      time_out_of_range_s: 1800,
    })
  })

  it('excursion_too_long: exactly max_excursion_s is still allowed', () => {
    const { events } = replay(fridge, BOUND_AT, readings([0, 9], [30, 5]))
    expect(breaks(events)).toEqual([])
  })

  it('cumulative_budget: the budget never resets between excursions', () => {
    // Three 25-minute excursions (each within the 30-minute limit) separated by recoveries:
    // the third crosses 60 minutes of cumulative time 10 minutes after it starts.
    // (MKT is left out: 75 minutes at 9 °C would trip it first.)
    const fridgeNoMkt = resolveProfile({ ...fridge, name: 'fridge-without-mkt', mkt_max_c: null })
    const { state, events } = replay(fridgeNoMkt, BOUND_AT, [
      ...everyMinute(0, 24, 9),
      ...everyMinute(25, 39, 5),
      ...everyMinute(40, 64, 9),
      ...everyMinute(65, 79, 5),
      ...everyMinute(80, 104, 9),
      ...everyMinute(105, 110, 5),
    ])
    expect(types(events)).toEqual([
      'temperature.excursion@5',
      'temperature.recovered@25',
      'temperature.excursion@45',
      'temperature.recovered@65',
      'temperature.excursion@85',
      'cold-chain.break@90',
      'temperature.recovered@105',
    ])
    expect(breaks(events)[0]!.data).toMatchObject({
      reason: 'cumulative_budget',
      threshold: 'max_cumulative_s',
      limit: 3600,
      time_out_of_range_s: 3600,
      excursion_started_at: iso(80),
      excursion_duration_s: 600,
    })
    expect(summarize(state)).toMatchObject({ state: 'BROKEN', time_out_of_range_s: 4500 })
    expect(summarize(state).excursions).toHaveLength(3)
  })

  it('cumulative_budget: grace time counts, so many short blips break too', () => {
    const blips = Array.from({ length: 16 }, (_, i) => readings([i * 10, 9], [i * 10 + 4, 5])).flat()
    const { events } = replay(fridge, BOUND_AT, blips)
    expect(types(events)).toEqual(['cold-chain.break@150'])
    expect(events[0]!.data).toMatchObject({ reason: 'cumulative_budget', time_out_of_range_s: 3600, excursion_duration_s: 0 })
  })

  it('mkt_exceeded: controlled room allows 29 °C as an excursion, but not as the mean kinetic temperature', () => {
    const { events } = replay(room, BOUND_AT, everyMinute(0, 70, 29))
    expect(types(events)).toEqual(['temperature.excursion@15', 'cold-chain.break@60'])
    expect(events[1]!.data).toMatchObject({ reason: 'mkt_exceeded', threshold: 'mkt_max_c', limit: 25, mkt_c: 29 })
  })

  it('mkt_exceeded: MKT is judged only once an hour is covered, so a warm start alone does not break', () => {
    const { events } = replay(room, BOUND_AT, everyMinute(0, 59, 29))
    expect(breaks(events)).toEqual([])
  })

  it('mkt: a warm spell that the rest of the delivery averages out is no break', () => {
    const { state, events } = replay(room, BOUND_AT, [...everyMinute(0, 19, 28), ...everyMinute(20, 120, 22)])
    expect(breaks(events)).toEqual([])
    expect(summarize(state).mkt_c).toBeGreaterThan(22)
    expect(summarize(state).mkt_c).toBeLessThan(25)
  })

  it('is emitted at most once per delivery; tracking goes on after it', () => {
    const { state, events } = replay(fridge, BOUND_AT, [
      ...readings([0, -1], [1, 5], [2, -3]), // two hard-limit readings
      ...everyMinute(3, 50, 12), // then a 47-minute excursion
      ...readings([51, 5]),
    ])
    expect(breaks(events)).toHaveLength(1)
    expect(breaks(events)[0]!.data.reason).toBe('hard_limit')
    expect(types(events)).toEqual(['cold-chain.break@0', 'temperature.excursion@7', 'temperature.recovered@51'])
    expect(summarize(state)).toMatchObject({ state: 'BROKEN', min_c: -3, max_c: 12, time_out_of_range_s: 60 + 49 * 60 })
  })
})

describe('sensor gaps', () => {
  it('a gap longer than max_gap_s raises sensor.offline; the unknown time counts as out of range', () => {
    const { state, events } = replay(fridge, BOUND_AT, readings([0, 5], [40, 5]))
    // The 5 °C reading holds for max_gap_s (15 min); minutes 15–40 are unknown.
    expect(types(events)).toEqual(['sensor.offline@15', 'temperature.excursion@20', 'temperature.recovered@40'])
    expect(events[0]).toEqual({
      type: 'sensor.offline',
      key: `offline:${at(15)}`,
      at: at(15),
      data: { last_reading_at: iso(0), offline_since: iso(15), back_online_at: iso(40), max_gap_s: 900 },
    })
    expect(events[1]!.data).toMatchObject({ kind: 'unknown', peak_c: null })
    expect(summarize(state)).toMatchObject({
      time_out_of_range_s: 1500,
      unknown_s: 1500,
      mkt_c: 5,
      excursions: [{ started_at: iso(15), ended_at: iso(40), duration_s: 1500, peak_c: null, kind: 'unknown' }],
    })
  })

  it('a gap that makes a break gives the reason sensor_gap', () => {
    const { events } = replay(fridge, BOUND_AT, readings([0, 5], [50, 5]))
    expect(breaks(events)[0]).toMatchObject({
      at: at(45),
      data: { reason: 'sensor_gap', threshold: 'max_excursion_s', temp_c: null, unknown_s: 1800 },
    })
  })

  it('a gap inside an excursion extends it: the known part is high, the rest unknown', () => {
    const { events } = replay(fridge, BOUND_AT, readings([0, 9], [10, 9], [20, 9], [40, 5]))
    // 9 °C from 0 to 35 (20 + 15), unknown 35–40: 40 minutes out of range, crossing 30 at minute 30 (known).
    expect(types(events)).toEqual(['temperature.excursion@5', 'cold-chain.break@30', 'sensor.offline@35', 'temperature.recovered@40'])
    expect(breaks(events)[0]!.data.reason).toBe('excursion_too_long')
    expect(events[3]!.data).toMatchObject({ kind: 'high', peak_c: 9, duration_s: 2400, unknown_s: 300 })
  })

  it('silence between binding and the first reading counts too', () => {
    const { state, events } = replay(fridge, BOUND_AT, readings([20, 5]))
    expect(types(events)).toEqual(['sensor.offline@15'])
    expect(events[0]!.data).toMatchObject({ last_reading_at: null, offline_since: iso(15), back_online_at: iso(20) })
    expect(summarize(state).time_out_of_range_s).toBe(300)
  })

  it('with max_gap_s null a reading holds until the next, however late', () => {
    const noGaps = resolveProfile({ min_c: 2, max_c: 8, max_gap_s: null })
    const { state, events } = replay(noGaps, BOUND_AT, readings([60, 5], [600, 5]))
    expect(events).toEqual([])
    expect(summarize(state).time_out_of_range_s).toBe(0)
  })
})

describe('evaluate', () => {
  it('mutates and returns the state it is given, and can be fed one reading at a time', () => {
    const state = initialColdChain(fridge, BOUND_AT)
    const events: RuleEvent[] = []
    for (const r of [...everyMinute(0, 9, 5), ...everyMinute(10, 45, 9)]) {
      const result = evaluate(state, fridge, [r], events)
      expect(result.state).toBe(state)
    }
    expect(events).toEqual(replay(fridge, BOUND_AT, [...everyMinute(0, 9, 5), ...everyMinute(10, 45, 9)]).events)
  })

  it('skips readings at or before the last evaluated one (those go through recompute)', () => {
    const { state } = replay(fridge, BOUND_AT, readings([0, 5], [10, 5]))
    const before = structuredClone(state)
    expect(evaluate(state, fridge, readings([10, -5], [5, -5])).events).toEqual([])
    expect(state).toEqual(before)
  })

  it('keeps a state that survives a JSON round trip', () => {
    const { state } = replay(fridge, BOUND_AT, [...everyMinute(0, 9, 5), ...everyMinute(10, 20, 9)])
    const restored = JSON.parse(JSON.stringify(state))
    expect(restored).toEqual(state)
    const next = readings([21, 9], [40, 9])
    expect(evaluate(restored, fridge, next).events).toEqual(evaluate(state, fridge, next).events)
  })
})
