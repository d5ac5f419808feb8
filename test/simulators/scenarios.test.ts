import { describe, expect, it } from 'vitest'
import { readingsBetween, scenario, SCENARIOS, type ScenarioName } from '../../simulators/scenarios.js'

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const START = Date.parse('2025-03-01T08:00:00Z')
const trip = (name: ScenarioName, seed = 7, intervalMs = 30_000) => readingsBetween(name, seed, START, START + 2 * HOUR, intervalMs)
const seeds = [1, 2, 3, 42, 1234]

/** The longest run of consecutive readings above `limit`, in ms (first to last reading of the run). */
function longestAbove(readings: { ts: number; temp_c: number }[], limit: number): number {
  let best = 0
  let since: number | null = null
  for (const r of readings) {
    if (r.temp_c > limit) best = Math.max(best, r.ts - (since ??= r.ts))
    else since = null
  }
  return best
}

describe('tote scenarios', () => {
  it('are deterministic per seed and differ between seeds', () => {
    for (const name of SCENARIOS) {
      expect(trip(name, 7)).toEqual(trip(name, 7))
      expect(trip(name, 7)).not.toEqual(trip(name, 8))
    }
  })

  it('give readings on the interval from the start, with a draining battery', () => {
    const first = scenario('normal', 1, START, 10_000)
    const readings = [first.next().value!, first.next().value!, first.next().value!]
    expect(readings.map((r) => r.ts)).toEqual([START, START + 10_000, START + 20_000])
    const all = trip('normal')
    expect(all.every((r) => r.battery > 0 && r.battery <= 1)).toBe(true)
    expect(all.at(-1)!.battery).toBeLessThan(all[0]!.battery)
  })

  it('normal stays refrigerated between 4 and 6 °C', () => {
    for (const seed of seeds) {
      const temps = trip('normal', seed).map((r) => r.temp_c)
      expect(Math.min(...temps)).toBeGreaterThanOrEqual(4)
      expect(Math.max(...temps)).toBeLessThanOrEqual(6)
    }
  })

  it('door-open spikes to ~12 °C for minutes, shorter than the 5-minute grace', () => {
    for (const seed of seeds) {
      const readings = trip('door-open', seed, 10_000)
      const peak = Math.max(...readings.map((r) => r.temp_c))
      expect(peak).toBeGreaterThan(10.5)
      expect(peak).toBeLessThan(13)
      expect(longestAbove(readings, 8)).toBeGreaterThanOrEqual(MINUTE)
      expect(longestAbove(readings, 8)).toBeLessThan(5 * MINUTE)
    }
  })

  it('compressor-failure crosses 8 °C and stays above for more than 30 minutes, towards ~15 °C', () => {
    for (const seed of seeds) {
      const readings = trip('compressor-failure', seed)
      expect(longestAbove(readings, 8)).toBeGreaterThan(30 * MINUTE)
      expect(readings.at(-1)!.temp_c).toBeGreaterThan(13.5)
      expect(readings[0]!.temp_c).toBeLessThan(6)
    }
  })

  it('freeze goes below 0 °C', () => {
    for (const seed of seeds) {
      const readings = trip('freeze', seed)
      expect(Math.min(...readings.map((r) => r.temp_c))).toBeLessThan(0)
      expect(readings[0]!.temp_c).toBeGreaterThan(2)
    }
  })

  it('sensor-dropout leaves gaps longer than the 900 s max_gap_s', () => {
    for (const seed of seeds) {
      const readings = trip('sensor-dropout', seed)
      const gaps = readings.slice(1).map((r, i) => r.ts - readings[i]!.ts)
      expect(Math.max(...gaps)).toBeGreaterThan(900_000)
      expect(readings.every((r) => r.temp_c > 4 && r.temp_c < 6)).toBe(true)
    }
  })
})
