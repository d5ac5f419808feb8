/**
 * A tiny seeded PRNG (mulberry32, public domain, Tommy Ettinger): 32 bits of state, uniform
 * floats in [0, 1). Good enough for sensor noise; not for anything secret. The same seed gives
 * the same sequence on every machine, which keeps the simulators' curves reproducible.
 */
export type Random = () => number

export function seededRandom(seed: number): Random {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/** A uniform float in [low, high). */
export const between = (random: Random, low: number, high: number): number => low + random() * (high - low)
