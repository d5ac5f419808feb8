import { describe, expect, it } from 'vitest'
import { ArrivingReadings } from '../../src/telemetry/cold-chain/arriving.js'

describe('totes with readings on their way', () => {
  it('counts every publish in flight, and lets a tote go quiet when the last one arrived', () => {
    const arriving = new ArrivingReadings(() => 0)
    arriving.add('t1')
    arriving.add('t1')
    arriving.remove('t1')
    expect(arriving.has('t1')).toBe(true)
    arriving.remove('t1')
    expect(arriving.has('t1')).toBe(false)
    arriving.remove('t1') // an extra arrival changes nothing
    arriving.add('t1')
    expect(arriving.has('t1')).toBe(true)
  })

  it('stops covering a tote whose last publish has been on its way for 30 s: a stuck store does not hide a gap', () => {
    let now = 1_000
    const arriving = new ArrivingReadings(() => now)
    arriving.add('t1')
    now += 29_999
    expect(arriving.has('t1')).toBe(true)
    now += 1
    expect(arriving.has('t1')).toBe(false)
    arriving.add('t1') // a new publish: on its way again
    expect(arriving.has('t1')).toBe(true)
  })
})
