import { describe, expect, it } from 'vitest'
import { meanKineticTemperature, MktAccumulator } from '../../rules/index.js'

describe('mean kinetic temperature (USP <1079.2>, ΔH/R = 10,000 K)', () => {
  it('matches a hand computation: one hour at 20 °C and one at 30 °C', () => {
    // 10000/293.15 = 34.112229, 10000/303.15 = 32.986970
    // mean of e^-34.112229 and e^-32.986970 = e^-32.986970 · (1 + e^-1.125259)/2 = e^-32.986970 · 0.662284
    // -ln(mean) = 32.986970 + 0.412061 = 33.399031 → MKT = 10000/33.399031 K = 299.4099 K = 26.26 °C
    const mkt = meanKineticTemperature([
      { temp_c: 20, weight_s: 3600 },
      { temp_c: 30, weight_s: 3600 },
    ])
    expect(mkt).toBeCloseTo(26.2599, 3)
    // Higher than the arithmetic mean (25 °C): warm time weighs more, which is the point of MKT.
  })

  it('weights each temperature by the time it was held (irregular sampling)', () => {
    const timeWeighted = meanKineticTemperature([
      { temp_c: 20, weight_s: 3 * 3600 },
      { temp_c: 30, weight_s: 3600 },
    ])
    const equalSamples = meanKineticTemperature([20, 20, 20, 30].map((temp_c) => ({ temp_c, weight_s: 1 })))
    expect(timeWeighted).toBeCloseTo(equalSamples!, 10)
    expect(timeWeighted).toBeCloseTo(23.6445, 3)
  })

  it('of a constant temperature is that temperature', () => {
    expect(
      meanKineticTemperature([
        { temp_c: 5, weight_s: 10 },
        { temp_c: 5, weight_s: 1000 },
      ]),
    ).toBeCloseTo(5, 10)
  })

  it('accumulates incrementally to the same value', () => {
    const acc = new MktAccumulator()
    expect(acc.value()).toBeNull()
    acc.add(20, 3600).add(30, 1800).add(30, 1800).add(25, 0)
    expect(acc.weight_s).toBe(7200)
    expect(acc.value()).toBeCloseTo(26.2599, 3)
  })
})
