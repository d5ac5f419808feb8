// Wall-clock sensor-gap detection: a tote that stops sending (refrigerated: max_gap_s 15 min).
import { describe, expect, it } from 'vitest'
import {
  builtInProfiles,
  checkSilence,
  evaluate,
  initialColdChain,
  replay,
  resolveProfile,
  summarize,
  type RuleEvent,
} from '../../rules/index.js'
import { at, BOUND_AT, everyMinute, iso, readings } from './helpers.js'

const fridge = builtInProfiles.refrigerated
const types = (events: RuleEvent[]) => events.map((e) => `${e.type}@${(e.at - BOUND_AT) / 60_000}`)

describe('checkSilence', () => {
  it('says nothing while the silence is within max_gap_s', () => {
    const state = initialColdChain(fridge, BOUND_AT)
    expect(checkSilence(state, fridge, at(15)).events).toEqual([])
  })

  it('raises sensor.offline once for a tote that never reported since binding', () => {
    const state = initialColdChain(fridge, BOUND_AT)
    expect(checkSilence(state, fridge, at(16)).events).toEqual([
      {
        type: 'sensor.offline',
        key: `offline:${at(15)}`,
        at: at(15),
        data: { last_reading_at: null, offline_since: iso(15), back_online_at: null, max_gap_s: 900 },
      },
    ])
    expect(checkSilence(state, fridge, at(17)).events).toEqual([])
  })

  it('breaks with sensor_gap once the unknown time outlasts max_excursion_s', () => {
    const state = initialColdChain(fridge, BOUND_AT)
    checkSilence(state, fridge, at(16))
    expect(checkSilence(state, fridge, at(45)).events).toEqual([])
    const { events } = checkSilence(state, fridge, at(46))
    expect(types(events)).toEqual(['cold-chain.break@45'])
    expect(events[0]!.data).toMatchObject({ reason: 'sensor_gap', threshold: 'max_excursion_s', unknown_s: 1800, temp_c: null })
    expect(summarize(state)).toMatchObject({ state: 'BROKEN', break: { reason: 'sensor_gap', at: iso(45) } })
    expect(checkSilence(state, fridge, at(200)).events).toEqual([])
  })

  it('counts silence after the last reading, against what is left of the budget', () => {
    const fridgeNoMkt = resolveProfile({ ...fridge, name: 'fridge-without-mkt', mkt_max_c: null })
    // 50 minutes out of range in two excursions leave 10 minutes of budget.
    const { state } = replay(fridgeNoMkt, BOUND_AT, [
      ...everyMinute(0, 24, 9),
      ...everyMinute(25, 39, 5),
      ...everyMinute(40, 64, 9),
      ...everyMinute(65, 70, 5),
    ])
    expect(types(checkSilence(state, fridgeNoMkt, at(90)).events)).toEqual(['sensor.offline@85'])
    const { events } = checkSilence(state, fridgeNoMkt, at(96))
    expect(types(events)).toEqual(['cold-chain.break@95'])
    expect(events[0]!.data).toMatchObject({ reason: 'sensor_gap', threshold: 'max_cumulative_s', time_out_of_range_s: 3600 })
  })

  it('a last reading out of range holds until max_gap_s: the break it implies is not a sensor gap', () => {
    const fridgeNoMkt = resolveProfile({ ...fridge, name: 'fridge-without-mkt', mkt_max_c: null })
    const { state } = replay(fridgeNoMkt, BOUND_AT, [...everyMinute(0, 59, 5), ...everyMinute(60, 80, 12)])
    const { events } = checkSilence(state, fridgeNoMkt, at(100))
    expect(types(events)).toEqual(['sensor.offline@95', 'cold-chain.break@90'])
    expect(events[1]!.data).toMatchObject({ reason: 'excursion_too_long', temp_c: 12, excursion_duration_s: 1800 })
    // The same break the readings would have shown had the tote kept sending 12 °C.
    const full = replay(fridgeNoMkt, BOUND_AT, [...everyMinute(0, 59, 5), ...everyMinute(60, 94, 12)])
    const { mkt_c: _a, ...fromReadings } = full.events.find((e) => e.type === 'cold-chain.break')!.data as Record<string, unknown>
    const { mkt_c: _b, ...fromSilence } = events[1]!.data as Record<string, unknown>
    expect(fromSilence).toEqual(fromReadings)
  })

  it('does not advance event time: the readings that arrive later are evaluated normally, without repeats', () => {
    const { state } = replay(fridge, BOUND_AT, everyMinute(0, 10, 5))
    const silent = checkSilence(state, fridge, at(60)).events
    expect(types(silent)).toEqual(['sensor.offline@25', 'cold-chain.break@55'])
    // The gateway had buffered nothing: the tote comes back at minute 61.
    const back = evaluate(state, fridge, readings([61, 5])).events
    expect(types(back)).toEqual(['temperature.excursion@30', 'temperature.recovered@61'])
    expect(summarize(state)).toMatchObject({ state: 'BROKEN', time_out_of_range_s: 36 * 60, unknown_s: 36 * 60 })
  })

  it('does nothing for a profile without gap detection', () => {
    const noGaps = resolveProfile({ min_c: 2, max_c: 8, max_gap_s: null })
    expect(checkSilence(initialColdChain(noGaps, BOUND_AT), noGaps, at(10_000)).events).toEqual([])
  })
})
