import canonicalize from 'canonicalize'
import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

const sha = (value: unknown) => `sha256:${createHash('sha256').update(canonicalize(value)!).digest('hex')}`

describe('a delivery from queue to patient', () => {
  let api: TestApi
  let admin: string
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('answers a create with exactly what reading the prescription back returns', async () => {
    const pharmacy = await api.pharmacy(admin)
    const bodies = [
      { patient_id: 'pt_1', cold_chain: false, pharmacy_id: pharmacy.id },
      {
        patient_id: 'pt_2',
        cold_chain: true,
        pharmacy_id: pharmacy.id,
        deliver_by: '2030-01-01T12:00:00.000Z',
        external_ref: 'RX-9',
        temperature_profile: {
          name: 'custom-vaccine',
          min_c: 2,
          max_c: 8,
          hard_min_c: 0,
          hard_max_c: 12,
          grace_s: 60,
          max_excursion_s: 600,
          max_cumulative_s: 1200,
        },
        delivery_address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        items: [
          { description: 'Vaccine', ndc: '0006-4963-00', quantity: 1 },
          { description: 'Syringes', quantity: 10 },
        ],
        metadata: { ward: 'B' },
      },
    ]
    for (const [i, body] of bodies.entries()) {
      const created = await api.post('/v1/prescriptions', admin, body, { 'idempotency-key': `same-as-read-${i}` })
      expect(created.status, created.text).toBe(201)
      const read = await api.get(`/v1/prescriptions/${created.body.rx_id}`, admin)
      expect(JSON.stringify(read.body)).toBe(created.text)
    }
  })

  it('queues, dispatches, picks up, hands off and delivers, with a chain anyone can recompute', async () => {
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId, driver2Id } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true })
    expect(rx.status).toBe('QUEUED')
    expect(rx.audit_hash).toMatch(/^sha256:[0-9a-f]{64}$/)
    const { rx_id, pharmacy_id, patient_id, cold_chain, temperature_profile, created_at } = rx
    expect(rx.audit_hash).toBe(sha({ rx_id, pharmacy_id, patient_id, cold_chain, temperature_profile, created_at }))

    const id = rx.delivery_id
    const steps: [string, Record<string, unknown>][] = [
      ['dispatch', { fleet_id: fleetId, driver_id: driverId, tote_id: tote.id }],
      ['pickup', { from: pharmacy.id, to: driverId, signature: 'data:image/png;base64,AAAA' }],
      ['handoff', { from: driverId, to: driver2Id, signature: 'signed by Sam' }],
      ['deliver', { verification: { method: 'otp', evidence: '482913' } }],
    ]
    for (const [action, body] of steps) {
      const res = await api.post(`/v1/deliveries/${id}/${action}`, admin, body)
      expect(res.status, `${action}: ${res.text}`).toBe(200)
    }
    const delivery = (await api.get(`/v1/deliveries/${id}`, admin)).body
    expect(delivery.status).toBe('DELIVERED')
    expect(delivery.custody.map((e: { type: string }) => e.type)).toEqual(['created', 'dispatched', 'picked_up', 'handoff', 'delivered'])

    // Recompute every link from nothing but the API's JSON and an RFC 8785 library.
    let head = rx.audit_hash
    for (const event of delivery.custody) {
      const { hash, ...rest } = event
      expect(event.prev_hash).toBe(head)
      expect(hash).toBe(sha(rest))
      head = hash
    }
    expect(delivery.custody[2].evidence_hash).toBe(`sha256:${createHash('sha256').update('data:image/png;base64,AAAA').digest('hex')}`)
    const verdict = await api.get(`/v1/deliveries/${id}/custody/verify`, admin)
    expect(verdict.body).toEqual({ valid: true, length: 5, head })

    const events = await api.get(`/v1/events?delivery_id=${id}`, admin)
    expect(events.body.data.map((e: { type: string }) => e.type)).toEqual([
      'delivery.created',
      'delivery.dispatched',
      'custody.handoff-signed',
      'delivery.picked-up',
      'custody.handoff-signed',
      'custody.patient-verified',
      'delivery.delivered',
    ])
    expect(events.body.data.map((e: { seq: number }) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7])
    expect(JSON.stringify(events.body)).not.toContain('pt_123') // thin payloads: no patient fields
  })

  it('refuses an illegal move with 409 naming the allowed actions', async () => {
    const rx = await api.prescription(admin, { pharmacy_id: (await api.pharmacy(admin)).id })
    const res = await api.post(`/v1/deliveries/${rx.delivery_id}/deliver`, admin, { verification: { method: 'otp', evidence: '1' } })
    expect(res.status).toBe(409)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    expect(res.body.code).toBe('invalid_transition')
    expect(res.body.allowed_actions).toEqual(['dispatch', 'cancel'])
  })

  it('finds a custody row edited directly in the database', async () => {
    const pharmacy = await api.pharmacy(admin)
    const { fleetId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId })
    await api.post(`/v1/deliveries/${rx.delivery_id}/cancel`, admin, { reason: 'patient moved' })
    await api.service.db
      .updateTable('custody_events')
      .set({ to_party: 'fl_someone_else' })
      .where('delivery_id', '=', rx.delivery_id)
      .where('seq', '=', 2)
      .execute()
    const verdict = await api.get(`/v1/deliveries/${rx.delivery_id}/custody/verify`, admin)
    expect(verdict.body).toMatchObject({ valid: false, first_bad_seq: 2 })
  })
})
