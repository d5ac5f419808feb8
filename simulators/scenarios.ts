import { between, seededRandom, type Random } from './prng.js'

/**
 * Realistic temperature curves of a refrigerated tote, one per scenario. Pure and deterministic:
 * the same (scenario, seed, start, interval) always gives the same readings. Two random streams
 * are drawn from the seed, one for the scenario's shape (set point, when the door opens, when
 * the compressor fails) and one for sensor noise, so the shape does not depend on the interval.
 *
 * The numbers are a typical 2–8 °C pharmacy tote: a set point near 5 °C, sensor noise ±0.2 °C
 * (a common accuracy of thermistor loggers), a slow drift of the compressor cycle, and the
 * refrigerated profile's durations in mind (grace 5 min, break after 30 min, gap after 15 min).
 */

export const SCENARIOS = ['normal', 'door-open', 'compressor-failure', 'freeze', 'sensor-dropout'] as const
export type ScenarioName = (typeof SCENARIOS)[number]

export type SimulatedReading = { ts: number; temp_c: number; battery: number }

/** °C after `s` seconds of the trip; null when the sensor is silent. */
type Curve = (s: number) => number | null

export function isScenario(name: string): name is ScenarioName {
  return (SCENARIOS as readonly string[]).includes(name)
}

/** Readings every `intervalMs` from `startMs`, forever (take what you need). */
export function* scenario(name: ScenarioName, seed: number, startMs: number, intervalMs: number): Generator<SimulatedReading> {
  const shape = seededRandom(seed)
  const noise = seededRandom(seed ^ 0x5eed5eed)
  const curve = curves[name](shape, noise)
  const charge = between(shape, 0.9, 1)
  const drainPerHour = between(shape, 0.01, 0.02) // a BLE/LTE logger reporting every few seconds
  for (let i = 0; ; i++) {
    const s = (i * intervalMs) / 1_000
    const temp = curve(s)
    if (temp === null) continue
    yield {
      ts: startMs + i * intervalMs,
      temp_c: Math.round(temp * 100) / 100,
      battery: Math.round(Math.max(0, charge - (drainPerHour * s) / 3_600) * 1_000) / 1_000,
    }
  }
}

/** The readings of [startMs, endMs). */
export function readingsBetween(name: ScenarioName, seed: number, startMs: number, endMs: number, intervalMs: number): SimulatedReading[] {
  const out: SimulatedReading[] = []
  for (const reading of scenario(name, seed, startMs, intervalMs)) {
    if (reading.ts >= endMs) break
    out.push(reading)
  }
  return out
}

/** A working tote: a set point near 5 °C, the compressor cycle's slow drift, sensor noise. */
function refrigerated(shape: Random, noise: Random): { clean: (s: number) => number; noisy: (s: number) => number } {
  const setPoint = between(shape, 4.7, 5.3)
  const amplitude = between(shape, 0.3, 0.5)
  const periodS = between(shape, 1_800, 3_600)
  const phase = between(shape, 0, 2 * Math.PI)
  const clean = (s: number) => setPoint + amplitude * Math.sin((2 * Math.PI * s) / periodS + phase)
  return { clean, noisy: (s) => clean(s) + between(noise, -0.2, 0.2) }
}

const curves: Record<ScenarioName, (shape: Random, noise: Random) => Curve> = {
  normal: (shape, noise) => refrigerated(shape, noise).noisy,

  // The lid is opened at each handoff: the air warms towards ~12 °C within a minute, then the
  // cold packs pull it back. Short enough to stay within the 5-minute grace.
  'door-open': (shape, noise) => {
    const base = refrigerated(shape, noise)
    const peak = between(shape, 11.5, 12.5)
    // Open 1–2.5 minutes: with the recovery, about 2–4.5 minutes above 8 °C, inside the grace.
    const openings = schedule(shape, [300, 600], [900, 1_800], [60, 150])
    return (s) => {
      const door = openings(s)
      if (!door) return base.noisy(s)
      const toward = (from: number, t: number) => peak - (peak - from) * Math.exp(-t / 40) // ~40 s to warm most of the way
      if (s < door.end) return toward(base.clean(s), s - door.start) + between(noise, -0.2, 0.2)
      const atClose = toward(base.clean(door.end), door.end - door.start)
      return base.clean(s) + (atClose - base.clean(door.end)) * Math.exp(-(s - door.end) / 80) + between(noise, -0.2, 0.2)
    }
  },

  // The compressor stops: the tote warms past 8 °C within ~10 minutes, towards ~15 °C.
  'compressor-failure': (shape, noise) => {
    const base = refrigerated(shape, noise)
    const failsAt = between(shape, 480, 900)
    const ambient = between(shape, 14.5, 15.5)
    const tauS = between(shape, 900, 1_500)
    return (s) =>
      s < failsAt ? base.noisy(s) : ambient - (ambient - base.clean(s)) * Math.exp(-(s - failsAt) / tauS) + between(noise, -0.2, 0.2)
  },

  // A frozen gel pack touches the sensor: the temperature slides below 0 °C and stays there.
  freeze: (shape, noise) => {
    const base = refrigerated(shape, noise)
    const coolsAt = between(shape, 600, 1_200)
    const floor = between(shape, -3, -1.5)
    const tauS = between(shape, 600, 900)
    return (s) =>
      s < coolsAt ? base.noisy(s) : floor + (base.clean(s) - floor) * Math.exp(-(s - coolsAt) / tauS) + between(noise, -0.2, 0.2)
  },

  // The logger loses its radio for 20–30 minutes at a time: longer than the 15-minute max_gap_s.
  'sensor-dropout': (shape, noise) => {
    const base = refrigerated(shape, noise)
    const silences = schedule(shape, [600, 1_200], [2_400, 3_600], [1_200, 1_800])
    return (s) => {
      const silence = silences(s)
      return silence && s < silence.end ? null : base.noisy(s)
    }
  },
}

type Interval = { start: number; end: number }

/**
 * Recurring intervals drawn lazily: the first starts within `first` seconds, each lasts `length`,
 * and the next starts `every` after the previous one ended. Returns the latest interval that has
 * started by `s` (it may be over), or null before the first.
 */
function schedule(
  shape: Random,
  first: [number, number],
  every: [number, number],
  length: [number, number],
): (s: number) => Interval | null {
  const intervals: Interval[] = []
  const add = (start: number) => intervals.push({ start, end: start + between(shape, ...length) })
  add(between(shape, ...first))
  return (s) => {
    while (intervals.at(-1)!.start <= s) add(intervals.at(-1)!.end + between(shape, ...every))
    for (let i = intervals.length - 1; i >= 0; i--) if (intervals[i]!.start <= s) return intervals[i]!
    return null
  }
}
