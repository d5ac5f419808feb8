import { describe, expect, it } from 'vitest'
import { planMove } from '../../src/domain/delivery-machine.js'
import { handoffTemperature } from '../../src/domain/handoff-temperature.js'

const failed = { status: 'FAILED' as const, coldChainState: 'OK' as const, released: false }

describe('reattempts', () => {
  it('sends a failed delivery out again while attempts remain, 3 unless the pharmacy says otherwise', () => {
    expect(planMove({ ...failed, attempt: 1 }, 'reattempt')).toMatchObject({ status: 'DISPATCHED', custody: 'reattempted', ends: false })
    expect(planMove({ ...failed, attempt: 2 }, 'reattempt')).toMatchObject({ status: 'DISPATCHED' })
    expect(() => planMove({ ...failed, attempt: 3 }, 'reattempt')).toThrow(/Attempt 3 of 3 has failed/)
    expect(planMove({ ...failed, attempt: 4, maxAttempts: 5 }, 'reattempt')).toMatchObject({ status: 'DISPATCHED' })
  })

  it('leaves only return once the last attempt failed', () => {
    try {
      planMove({ ...failed, attempt: 1, maxAttempts: 1 }, 'reattempt')
      expect.unreachable()
    } catch (error) {
      expect(error).toMatchObject({ code: 'invalid_transition', extra: { status_now: 'FAILED', allowed_actions: ['return'] } })
    }
  })
})

describe('the temperature at a custody event', () => {
  const figures = {
    broken_at: '2031-01-01T12:00:00.000Z',
    excursions: [
      { started_at: '2031-01-01T10:00:00.000Z', ended_at: '2031-01-01T10:30:00.000Z', duration_s: 1800, peak_c: 9, kind: 'high' as const },
    ],
  }
  const reading = { temp_c: 4.2, ts: Date.parse('2031-01-01T09:59:00.000Z') }

  it('is the state judged for that moment, not the state now', () => {
    expect(handoffTemperature(figures, reading, '2031-01-01T09:59:30.000Z')).toEqual({
      last_c: 4.2,
      at: '2031-01-01T09:59:00.000Z',
      state: 'OK',
    })
    expect(handoffTemperature(figures, reading, '2031-01-01T10:10:00.000Z').state).toBe('EXCURSION')
    expect(handoffTemperature(figures, reading, '2031-01-01T10:30:00.000Z').state).toBe('OK')
    expect(handoffTemperature(figures, reading, '2031-01-01T12:00:00.000Z').state).toBe('BROKEN')
  })

  it('has null members before any reading', () => {
    expect(handoffTemperature({ broken_at: null, excursions: [] }, null, '2031-01-01T09:00:00.000Z')).toEqual({
      last_c: null,
      at: null,
      state: 'OK',
    })
  })
})
