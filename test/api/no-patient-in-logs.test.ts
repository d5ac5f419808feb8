import { Writable } from 'node:stream'
import pino from 'pino'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loggerOptions } from '../../src/logger.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { pinOf } from '../helpers/pins.js'
import { waitFor } from '../helpers/wait.js'
import { startReceiver, statuses, type Receiver } from '../webhooks/receiver.js'

// No patient field reaches a log line (docs/security.md): not the patient id, the delivery
// address, the verification evidence or a prescription's metadata — on the happy path of a
// delivery, with its webhooks and writeback, nor on the error paths, where a careless log would
// quote the request. The service logs at `trace`, so every line it could write is written.

const PATIENT = {
  patient_id: 'pt_SENTINEL_patient_7f3a',
  delivery_address: {
    line1: '17 Sentinel Lane',
    line2: 'Flat Sentinel-9',
    city: 'Sentinelville',
    region: 'IL',
    postal_code: '60999',
    country: 'US',
  },
  metadata: { patient_name: 'Sentinel Patientperson', dob: '1950-01-02' },
}
const EVIDENCE = 'otp:SENTINEL-482913'
const SIGNATURE = 'data:image/png;base64,U0VOVElORUwtc2lnbmF0dXJl'
const SENTINELS = [/sentinel/i, /7f3a/, /60999/, /1950-01-02/, /482913/, /U0VOVElORUwtc2lnbmF0dXJl/]

describe('log lines across a delivery and its error paths', () => {
  const lines: string[] = []
  let api: TestApi
  let admin: string
  let receiver: Receiver
  let writeback: Receiver
  beforeAll(async () => {
    const sink = new Writable({ write: (chunk, _enc, done) => void (lines.push(String(chunk)), done()) })
    api = await startTestService(
      { LOG_LEVEL: 'trace', WEBHOOK_RETRY_SCHEDULE: '50ms,50ms' },
      { logger: pino(loggerOptions('trace'), sink) },
    )
    await api.service.start()
    admin = await api.adminToken()
    receiver = await startReceiver(statuses(500, 200)) // the first attempt of each event fails
    writeback = await startReceiver(statuses(503, 200))
  })
  afterAll(async () => {
    await receiver.close()
    await writeback.close()
    await api.stop()
  })

  const leaks = () => lines.filter((line) => SENTINELS.some((s) => s.test(line)))

  it('a delivery from prescription to writeback logs none of its patient fields', async () => {
    const pharmacy = await api.pharmacy(admin, { writeback: { url: writeback.url } })
    expect((await api.post('/v1/webhooks', admin, { url: receiver.url, events: ['*'], pharmacy_id: pharmacy.id })).status).toBe(201)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, {
      pharmacy_id: pharmacy.id,
      ...PATIENT,
      items: [{ description: 'Amoxicillin 500 mg', ndc: '00093-4155-73', quantity: 21 }],
    })
    const id = rx.delivery_id
    const step = async (action: string, body: Record<string, unknown>) => {
      const res = await api.post(`/v1/deliveries/${id}/${action}`, admin, body)
      expect(res.status, `${action}: ${res.text}`).toBe(200)
    }
    await step('dispatch', { fleet_id: fleetId, driver_id: driverId })
    await step('pickup', { from: pharmacy.id, to: driverId, signature: SIGNATURE })
    await step('deliver', { verification: { method: 'otp', evidence: EVIDENCE } })
    expect((await api.get(`/v1/prescriptions/${rx.rx_id}`, admin)).text).toContain(PATIENT.patient_id) // it is there to leak
    await waitFor(
      () => writeback.requests.length >= 2 && receiver.requests.some((r) => r.body.includes('writeback.completed')),
      15_000,
      'the writeback retried and announced',
    )
    // The service did log this delivery: a line per request, the deliver among them.
    expect(lines.some((l) => l.includes('"route":"/v1/deliveries/:id/deliver"'))).toBe(true)
    expect(leaks()).toEqual([])
  })

  it('a delivery that requires a PIN logs it nowhere and sends it in no webhook, right or wrong', async () => {
    const pharmacy = await api.pharmacy(admin, { pod_requirements: { pin: true } })
    expect((await api.post('/v1/webhooks', admin, { url: receiver.url, events: ['*'], pharmacy_id: pharmacy.id })).status).toBe(201)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const id = (await api.prescription(admin, { pharmacy_id: pharmacy.id })).delivery_id
    const act = (action: string, body: Record<string, unknown>) => api.post(`/v1/deliveries/${id}/${action}`, admin, body)
    expect((await act('dispatch', { fleet_id: fleetId, driver_id: driverId })).status).toBe(200)
    expect((await act('pickup', { from: pharmacy.id, to: driverId, signature: 's' })).status).toBe(200)
    const pin = (await pinOf(api, id))!
    const wrong = pin === '271828' ? '314159' : '271828'
    const deliver = (p: string) => act('deliver', { verification: { method: 'otp', evidence: 'ok' }, proof: { pin: p } })
    expect((await deliver(wrong)).status).toBe(422)
    expect((await deliver(pin)).status).toBe(200)
    await waitFor(() => receiver.requests.some((r) => r.body.includes(id) && r.body.includes('delivery.delivered')), 15_000, 'its webhooks')
    // As a value it would be quoted (JSON) or follow `=` (a query string); long numbers (times) may hold the digits.
    const shown = (text: string) => [pin, wrong].some((p) => text.includes(`"${p}"`) || text.includes(`=${p}`))
    expect(
      lines.some((l) => l.includes(id)),
      'the delivery was logged',
    ).toBe(true)
    expect(lines.filter(shown)).toEqual([])
    expect(receiver.requests.filter((r) => shown(r.body))).toEqual([])
  })

  it('refused requests that carry patient fields log none of them', async () => {
    const pharmacy = await api.pharmacy(admin)
    const post = (body: string, key?: string) =>
      api.request('POST', '/v1/prescriptions', {
        token: admin,
        raw: body,
        headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      })
    // Malformed JSON: a parser's message quotes the text around the error.
    expect(
      (await post(`{"patient_id": "${PATIENT.patient_id}", "delivery_address": {"line1": "17 Sentinel Lane" oops}`, 'k-1')).status,
    ).toBe(400)
    // Fields that fail validation, next to patient fields.
    const invalid = await post(JSON.stringify({ ...PATIENT, pharmacy_id: pharmacy.id, cold_chain: 'sentinel', bogus: 'Sentinel' }), 'k-2')
    expect(invalid.status).toBe(422)
    const tooLong = await post(
      JSON.stringify({ ...PATIENT, patient_id: `pt_sentinel_${'x'.repeat(500)}`, pharmacy_id: pharmacy.id, cold_chain: false }),
      'k-3',
    )
    expect(tooLong.status).toBe(422)
    // The same key with another body.
    const body = { ...PATIENT, pharmacy_id: pharmacy.id, cold_chain: false }
    expect((await post(JSON.stringify(body), 'k-4')).status).toBe(201)
    expect((await post(JSON.stringify({ ...body, patient_id: 'pt_sentinel_other' }), 'k-4')).status).toBe(422)
    // A failure inside the store while the prescription is being written: the detail is logged.
    await sql`drop table custody_events`.execute(api.service.db)
    const broken = await post(JSON.stringify({ ...body, patient_id: 'pt_sentinel_during_failure' }), 'k-5')
    expect(broken.status).toBe(500)
    expect(
      lines.some((l) => l.includes(broken.body.request_id) && /custody_events/.test(l)),
      'the 500 was logged with its cause',
    ).toBe(true)
    expect(leaks()).toEqual([])
  })
})
