import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { chainEvent, type CustodyEvent, type CustodyType } from '../../src/domain/custody.js'
import { currentHolder, decideHandover } from '../../src/domain/custody-rules.js'

const delivery = { pharmacy_id: 'ph_1' }
const at = '2025-01-01T00:00:00.000Z'

/** A chain of [type, from, to] steps, linked as the service links them. */
function chainOf(...steps: [CustodyType, string | null, string | null][]): CustodyEvent[] {
  const chain: CustodyEvent[] = []
  for (const [type, from, to] of steps) {
    chain.push(
      chainEvent(chain.at(-1)?.hash ?? 'sha256:audit', {
        seq: chain.length + 1,
        type,
        actor: { client_id: 'cl_1', sub: 'us_1' },
        from,
        to,
        location: null,
        evidence_hash: null,
        occurred_at: at,
        recorded_at: at,
      }),
    )
  }
  return chain
}

const created = chainOf(['created', null, 'ph_1'])
const pickedUp = chainOf(['created', null, 'ph_1'], ['dispatched', 'ph_1', 'dr_a'], ['picked_up', 'us_1', 'dr_a'])

describe('who holds the goods', () => {
  it('is whoever received them last; dispatch, failure and disposition hand nothing over', () => {
    expect(currentHolder([])).toBeNull()
    expect(currentHolder(created)).toBe('ph_1')
    expect(currentHolder(chainOf(['created', null, 'ph_1'], ['dispatched', 'ph_1', 'dr_a']))).toBe('ph_1')
    expect(currentHolder(pickedUp)).toBe('dr_a')
    expect(
      currentHolder(
        chainOf(
          ['created', null, 'ph_1'],
          ['picked_up', 'us_1', 'dr_a'],
          ['handoff', 'dr_a', 'dr_b'],
          ['failed', null, null],
          ['disposition', null, null],
        ),
      ),
    ).toBe('dr_b')
  })
})

describe('handing the goods over', () => {
  it('dispatches from the pharmacy to the driver, or to the fleet when no driver is named', () => {
    expect(decideHandover(delivery, created, { action: 'dispatch', fleet_id: 'fl_1', driver_id: 'dr_a' })).toEqual({
      ok: true,
      from: 'ph_1',
      to: 'dr_a',
      driver: null,
    })
    expect(decideHandover(delivery, created, { action: 'dispatch', fleet_id: 'fl_1' })).toMatchObject({
      ok: true,
      from: 'ph_1',
      to: 'fl_1',
    })
  })

  it('lets pharmacy staff or this pharmacy sign a pickup, to a driver the caller checks', () => {
    expect(decideHandover(delivery, created, { action: 'pickup', from: 'us_9', to: 'dr_a' })).toEqual({
      ok: true,
      from: 'us_9',
      to: 'dr_a',
      driver: { id: 'dr_a', pointer: '/to' },
    })
    expect(decideHandover(delivery, created, { action: 'pickup', from: 'ph_1', to: 'dr_a' })).toMatchObject({ ok: true, from: 'ph_1' })
  })

  it('lets the driver still holding the goods after a failed attempt sign the pickup of the reattempt, and no other driver', () => {
    const reattempted = chainOf(
      ['created', null, 'ph_1'],
      ['dispatched', 'ph_1', 'dr_a'],
      ['picked_up', 'us_1', 'dr_a'],
      ['failed', null, null],
      ['reattempted', 'dr_a', 'dr_b'],
    )
    expect(decideHandover(delivery, reattempted, { action: 'pickup', from: 'dr_a', to: 'dr_b' })).toMatchObject({
      ok: true,
      from: 'dr_a',
      to: 'dr_b',
    })
    expect(decideHandover(delivery, reattempted, { action: 'pickup', from: 'dr_c', to: 'dr_b' })).toMatchObject({
      ok: false,
      pointer: '/from',
    })
    // The reattempt names the new driver when one is given, and checks them against the fleet.
    expect(decideHandover({ ...delivery, driver_id: 'dr_a' }, pickedUp, { action: 'reattempt', driver_id: 'dr_b' })).toEqual({
      ok: true,
      from: 'dr_a',
      to: 'dr_b',
      driver: { id: 'dr_b', pointer: '/driver_id' },
    })
    expect(decideHandover({ ...delivery, driver_id: 'dr_a' }, pickedUp, { action: 'reattempt' })).toMatchObject({
      to: 'dr_a',
      driver: null,
    })
  })

  it('refuses a pickup signed by a driver, or by another pharmacy', () => {
    expect(decideHandover(delivery, created, { action: 'pickup', from: 'dr_b', to: 'dr_a' })).toEqual({
      ok: false,
      pointer: '/from',
      message: 'pickup is signed by pharmacy staff (us_…), the pharmacy (ph_…), or after a failed attempt the driver holding the goods',
    })
    expect(decideHandover(delivery, created, { action: 'pickup', from: 'ph_2', to: 'dr_a' })).toEqual({
      ok: false,
      pointer: '/from',
      message: "is not this delivery's pharmacy",
    })
  })

  it('hands off only from the holder, to another driver the caller checks', () => {
    expect(decideHandover(delivery, pickedUp, { action: 'handoff', from: 'dr_a', to: 'dr_b' })).toEqual({
      ok: true,
      from: 'dr_a',
      to: 'dr_b',
      driver: { id: 'dr_b', pointer: '/to' },
    })
    expect(decideHandover(delivery, pickedUp, { action: 'handoff', from: 'dr_b', to: 'dr_c' })).toEqual({
      ok: false,
      pointer: '/from',
      message: 'the goods are held by dr_a',
    })
    expect(decideHandover(delivery, pickedUp, { action: 'handoff', from: 'dr_a', to: 'dr_a' })).toEqual({
      ok: false,
      pointer: '/to',
      message: 'must be another driver',
    })
  })

  it('returns only from the holder, and only to this pharmacy', () => {
    expect(decideHandover(delivery, pickedUp, { action: 'return', from: 'dr_a', to: 'ph_1' })).toEqual({
      ok: true,
      from: 'dr_a',
      to: 'ph_1',
      driver: null,
    })
    expect(decideHandover(delivery, pickedUp, { action: 'return', from: 'us_1', to: 'ph_1' })).toEqual({
      ok: false,
      pointer: '/from',
      message: 'the goods are held by dr_a',
    })
    expect(decideHandover(delivery, pickedUp, { action: 'return', from: 'dr_a', to: 'ph_2' })).toEqual({
      ok: false,
      pointer: '/to',
      message: 'returns go back to the pharmacy ph_1',
    })
  })

  it('delivers from the holder to the patient', () => {
    expect(decideHandover(delivery, pickedUp, { action: 'deliver' })).toEqual({ ok: true, from: 'dr_a', to: 'patient', driver: null })
  })

  it('hands nothing over on a failure, a cancellation or a disposition', () => {
    for (const action of ['fail', 'cancel', 'disposition'] as const) {
      expect(decideHandover(delivery, pickedUp, { action })).toEqual({ ok: true, from: null, to: null, driver: null })
    }
  })
})

describe('a chain built from what the rules accept (property)', () => {
  const party = fc.constantFrom('dr_a', 'dr_b', 'us_1', 'ph_1', 'ph_2')
  const anyAction = fc.oneof(
    fc.record({ action: fc.constantFrom('pickup' as const, 'handoff' as const, 'return' as const), from: party, to: party }),
    fc.record({ action: fc.constantFrom('deliver' as const, 'fail' as const, 'cancel' as const, 'disposition' as const) }),
  )
  const recorded = {
    pickup: 'picked_up',
    handoff: 'handoff',
    return: 'returned',
    deliver: 'delivered',
    fail: 'failed',
    cancel: 'cancelled',
    disposition: 'disposition',
  } as const

  it('hands goods over only from whoever holds them, and the receiver holds them next', () => {
    fc.assert(
      fc.property(fc.array(anyAction, { maxLength: 25 }), (actions) => {
        let steps: [CustodyType, string | null, string | null][] = [['created', null, 'ph_1']]
        for (const input of actions) {
          const chain = chainOf(...steps)
          const holder = currentHolder(chain)
          const decision = decideHandover(delivery, chain, input)
          if ((input.action === 'handoff' || input.action === 'return') && input.from !== holder) {
            expect(decision).toEqual({ ok: false, pointer: '/from', message: `the goods are held by ${holder}` })
          }
          if (!decision.ok) continue
          if (input.action === 'handoff' || input.action === 'return' || input.action === 'deliver') expect(decision.from).toBe(holder)
          steps = [...steps, [recorded[input.action], decision.from, decision.to]]
          expect(currentHolder(chainOf(...steps))).toBe(decision.to ?? holder)
        }
      }),
    )
  })
})
