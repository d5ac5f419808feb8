// Mean kinetic temperature, USP <1079.2>:
//
//   MKT = (ΔH/R) / -ln( Σ wᵢ·e^(-ΔH/(R·Tᵢ)) / Σ wᵢ )      (T in kelvin)
//
// with ΔH = 83.144 kJ/mol and R = 8.3144 J/(mol·K), so ΔH/R = 10,000 K. USP writes it for
// n equally spaced samples; for irregular sampling each temperature is weighted by the time it
// was held (wᵢ, seconds), which is the same formula with the equal weights made explicit.

/** ΔH/R in kelvin: 83,144 J/mol ÷ 8.3144 J/(mol·K) (USP <1079.2>). */
export const DELTA_H_OVER_R_K = 10_000
const KELVIN_OFFSET = 273.15

/** The two running sums MKT needs; a plain object so it can live inside a JSON-serialized state. */
export type MktSums = {
  /** Σ wᵢ, seconds. */
  weight_s: number
  /** Σ wᵢ·e^(-ΔH/(R·Tᵢ)). */
  weighted_arrhenius: number
}

export function emptyMktSums(): MktSums {
  return { weight_s: 0, weighted_arrhenius: 0 }
}

/** Adds `temp_c` held for `weight_s` seconds. Mutates `sums`; non-positive weights are ignored. */
export function addToMkt(sums: MktSums, temp_c: number, weight_s: number): void {
  if (!(weight_s > 0)) return
  sums.weight_s += weight_s
  sums.weighted_arrhenius += weight_s * Math.exp(-DELTA_H_OVER_R_K / (temp_c + KELVIN_OFFSET))
}

/** MKT in °C, or null when no time has been accumulated. */
export function mktOf(sums: MktSums): number | null {
  if (!(sums.weight_s > 0)) return null
  return DELTA_H_OVER_R_K / -Math.log(sums.weighted_arrhenius / sums.weight_s) - KELVIN_OFFSET
}

/** Incremental MKT: add(temp_c, weight_s) as readings come, value() at any time. */
export class MktAccumulator {
  readonly sums: MktSums = emptyMktSums()

  add(temp_c: number, weight_s: number): this {
    addToMkt(this.sums, temp_c, weight_s)
    return this
  }

  /** MKT in °C, or null before any weighted sample. */
  value(): number | null {
    return mktOf(this.sums)
  }

  get weight_s(): number {
    return this.sums.weight_s
  }
}

/** MKT in °C of time-weighted samples, or null when their total weight is zero. */
export function meanKineticTemperature(samples: readonly { temp_c: number; weight_s: number }[]): number | null {
  const acc = new MktAccumulator()
  for (const s of samples) acc.add(s.temp_c, s.weight_s)
  return acc.value()
}
