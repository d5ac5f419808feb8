import { readFileSync } from 'node:fs'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ValidateFunction } from 'ajv'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'
import { testClock } from '../helpers/clock.js'
import { waitFor } from '../helpers/wait.js'
import { startReceiver, statuses, type Receiver, type ReceivedRequest } from '../webhooks/receiver.js'
import { fhirR4Validator, firstErrors } from './fhir-schema.js'

// A pharmacy whose writeback.format is fhir-r4 receives each outcome as an HL7 FHIR R4
// transaction Bundle on a real HTTP receiver; every Bundle validates against HL7's R4 JSON schema.

type Entry = { fullUrl: string; resource: Record<string, any>; request: { method: string; url: string } }
type Bundle = { resourceType: 'Bundle'; type: string; identifier: { value: string }; entry: Entry[] }

const { url: pgUrl } = await reachablePostgres()
const stores = [sqliteStore, ...(pgUrl ? [postgresStore(pgUrl)] : [])]
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

let validate: ValidateFunction
beforeAll(() => {
  validate = fhirR4Validator()
})

for (const store of stores)
  describe(`FHIR R4 writeback on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    const receivers: Receiver[] = []
    beforeAll(async () => {
      api = await store.start({ WEBHOOK_RETRY_SCHEDULE: '50ms,50ms' })
      await api.service.start()
      admin = await api.adminToken()
    })
    afterAll(async () => {
      await Promise.all(receivers.map((r) => r.close()))
      await api?.stop()
    })

    /** A pharmacy writing back FHIR to a fresh receiver, and a picked-up delivery of it. */
    async function pickedUp(rx: Record<string, unknown> = {}, reply?: Parameters<typeof startReceiver>[0]) {
      const receiver = await startReceiver(reply)
      receivers.push(receiver)
      const res = await api.post('/v1/pharmacies', admin, {
        name: 'FHIR Pharmacy',
        address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
        writeback: { url: `${receiver.url}/fhir`, format: 'fhir-r4' },
      })
      expect(res.status, res.text).toBe(201)
      expect(res.body.writeback).toMatchObject({ format: 'fhir-r4' })
      const pharmacy = { id: res.body.id as string, secret: res.body.writeback.secret as string }
      const { fleetId, driverId } = await api.fleetWithDriver(admin)
      const created = await api.prescription(admin, {
        pharmacy_id: pharmacy.id,
        items: [{ description: 'Insulin glargine 100 units/mL pen', ndc: '0088-2220-33', quantity: 5 }],
        ...rx,
      })
      for (const [action, body] of [
        ['dispatch', { fleet_id: fleetId, driver_id: driverId }],
        ['pickup', { from: pharmacy.id, to: driverId, signature: 'signed at the counter' }],
      ] as const) {
        const step = await api.post(`/v1/deliveries/${created.delivery_id}/${action}`, admin, body)
        expect(step.status, `${action}: ${step.text}`).toBe(200)
      }
      return { receiver, pharmacy, deliveryId: created.delivery_id, rxId: created.rx_id, driverId }
    }

    /** The one writeback received: signed with the pharmacy's secret, FHIR JSON, schema-valid. */
    async function receivedBundle(receiver: Receiver, secret: string): Promise<{ bundle: Bundle; request: ReceivedRequest }> {
      await waitFor(() => receiver.requests.length >= 1, 15_000, 'the writeback')
      const request = receiver.requests.at(-1)!
      expect(request.headers['content-type']).toBe('application/fhir+json')
      const bundle = new Webhook(secret).verify(request.body, {
        'webhook-id': String(request.headers['webhook-id']),
        'webhook-timestamp': String(request.headers['webhook-timestamp']),
        'webhook-signature': String(request.headers['webhook-signature']),
      }) as Bundle
      expect(validate(bundle), firstErrors(validate)).toBe(true)
      expect(bundle).toMatchObject({ resourceType: 'Bundle', type: 'transaction', identifier: { value: request.headers['webhook-id'] } })
      for (const entry of bundle.entry) {
        expect(entry.fullUrl).toMatch(/^urn:uuid:[0-9a-f-]{36}$/)
        expect(entry.request).toMatchObject({ method: 'POST', url: entry.resource.resourceType })
      }
      return { bundle, request }
    }

    const ofType = (bundle: Bundle, type: string) => bundle.entry.filter((e) => e.resource.resourceType === type)

    it('DELIVERED → MedicationDispense completed, handed over to the patient, performed by the driver; a Provenance per signed handoff', async () => {
      const { receiver, pharmacy, deliveryId, rxId, driverId } = await pickedUp({ patient_id: 'patient-4711' })
      const delivered = await api.post(`/v1/deliveries/${deliveryId}/deliver`, admin, {
        verification: { method: 'otp', evidence: '482913' },
      })
      expect(delivered.status, delivered.text).toBe(200)
      const { bundle } = await receivedBundle(receiver, pharmacy.secret)

      const [dispense, ...more] = ofType(bundle, 'MedicationDispense')
      expect(more).toHaveLength(0)
      const custody = delivered.body.custody as { type: string; occurred_at: string; hash: string; evidence_hash: string | null }[]
      expect(dispense!.resource).toMatchObject({
        status: 'completed',
        whenHandedOver: custody.find((e) => e.type === 'delivered')!.occurred_at,
        subject: { reference: 'Patient/patient-4711' },
        receiver: [{ reference: 'Patient/patient-4711', identifier: { value: 'patient-4711' } }],
        performer: [{ actor: { identifier: { value: driverId }, display: 'Dana Driver' } }],
        medicationCodeableConcept: { coding: [{ system: 'http://hl7.org/fhir/sid/ndc', code: '0088-2220-33' }] },
        authorizingPrescription: [{ identifier: { value: rxId } }],
        quantity: { value: 5 },
      })

      // Signed handoffs: the pickup (the driver's signature) and the delivery (the patient's verification).
      const signed = custody.filter((e) => e.evidence_hash !== null)
      const provenances = ofType(bundle, 'Provenance')
      expect(provenances.map((p) => p.resource.extension[0].valueString)).toEqual(signed.map((e) => e.hash))
      for (const [i, p] of provenances.entries()) {
        expect(p.resource.target).toEqual([{ reference: dispense!.fullUrl }])
        expect(Buffer.from(p.resource.signature[0].data, 'base64').toString()).toBe(signed[i]!.evidence_hash)
      }
      expect(ofType(bundle, 'Observation')).toHaveLength(0) // no cold chain, nothing to summarise
    })

    it('RETURNED → MedicationDispense stopped, not handed over', async () => {
      const { receiver, pharmacy, deliveryId, driverId } = await pickedUp()
      const returned = await api.post(`/v1/deliveries/${deliveryId}/return`, admin, {
        from: driverId,
        to: pharmacy.id,
        signature: 'nobody home',
      })
      expect(returned.status, returned.text).toBe(200)
      const { bundle } = await receivedBundle(receiver, pharmacy.secret)
      const [dispense] = ofType(bundle, 'MedicationDispense')
      expect(dispense!.resource).toMatchObject({
        status: 'stopped',
        statusReasonCodeableConcept: { text: expect.stringMatching(/undelivered/) },
      })
      expect(dispense!.resource).not.toHaveProperty('whenHandedOver')
      expect(dispense!.resource).not.toHaveProperty('receiver')
      expect(dispense!.resource.subject.identifier).toEqual({ system: expect.stringContaining(pharmacy.id), value: 'pt_123' })
      expect(ofType(bundle, 'Provenance')).toHaveLength(2) // pickup and return
    })

    it('is retried like any writeback: the same signed Bundle until the pharmacy accepts it, then writeback.completed', async () => {
      const { receiver, pharmacy, deliveryId } = await pickedUp({}, statuses(503, 200))
      await api.post(`/v1/deliveries/${deliveryId}/deliver`, admin, { verification: { method: 'otp', evidence: '1234' } })
      await waitFor(() => receiver.requests.length >= 2, 5_000, 'the retry')
      const [first, second] = receiver.requests
      expect(second!.body).toBe(first!.body)
      expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id'])
      await receivedBundle(receiver, pharmacy.secret)
      await waitFor(
        async () =>
          ((await api.get(`/v1/events?delivery_id=${deliveryId}`, admin)).body.data as { type: string }[]).some(
            (e) => e.type === 'writeback.completed',
          ),
        5_000,
        'writeback.completed',
      )
    })

    it('a pharmacy with no format, or rxtrace, keeps receiving the event envelope', async () => {
      const res = await api.post('/v1/pharmacies', admin, {
        name: 'Plain Pharmacy',
        address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
        writeback: { url: 'http://127.0.0.1:9/plain' },
      })
      expect(res.body.writeback).toMatchObject({ url: 'http://127.0.0.1:9/plain', format: 'rxtrace' })
      const bad = await api.post('/v1/pharmacies', admin, {
        name: 'Bad Pharmacy',
        address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
        writeback: { url: 'http://127.0.0.1:9/plain', format: 'hl7v2' },
      })
      expect(bad.status).toBe(422)
      expect(bad.body.errors[0].pointer).toBe('/writeback/format')
    })
  })

for (const store of stores)
  describe(`FHIR R4 writeback of a cold-chain delivery judged from real readings, on ${store.name}`, () => {
    const MINUTE = 60_000
    const clock = testClock()
    let api: TestApi
    let admin: string
    const receivers: Receiver[] = []
    beforeAll(async () => {
      api = await store.start({}, { clock })
      await api.service.start()
    })
    afterAll(async () => {
      await Promise.all(receivers.map((r) => r.close()))
      await api?.stop()
    })

    /**
     * A refrigerated delivery (2–8 °C) picked up an hour ago whose tote reported `temps` once a
     * minute since, through the ingest pipeline and the rule engine; the clock is then now.
     */
    async function carried(temps: number[]) {
      const now = Date.now()
      clock.set(now - 62 * MINUTE)
      admin = await api.adminToken()
      const receiver = await startReceiver()
      receivers.push(receiver)
      const res = await api.post('/v1/pharmacies', admin, {
        name: 'Cold Chain Pharmacy',
        address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
        writeback: { url: `${receiver.url}/fhir`, format: 'fhir-r4' },
      })
      const pharmacy = { id: res.body.id as string, secret: res.body.writeback.secret as string }
      const { fleetId, driverId } = await api.fleetWithDriver(admin)
      const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
      clock.set(now - 61 * MINUTE)
      expect(
        (await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId, tote_id: tote.id }))
          .status,
      ).toBe(200)
      expect(
        (await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: pharmacy.id, to: driverId, signature: 'ok' })).status,
      ).toBe(200)
      const start = now - 60 * MINUTE
      const readings = temps.map((temp_c, i) => ({ ts: start + i * MINUTE, temp_c }))
      // Handed to the pipeline as the clock jumps, with no await between: the tote has spoken
      // before the service's once-a-second silence check can see an hour without a reading.
      clock.set(now)
      await api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify(readings)))
      await api.service.monitor.flush()
      admin = await api.adminToken()
      return { receiver, pharmacy, deliveryId: rx.delivery_id, driverId }
    }

    async function bundleOf(receiver: Receiver, secret: string): Promise<Bundle> {
      await waitFor(() => receiver.requests.length >= 1, 15_000, 'the writeback')
      const request = receiver.requests[0]!
      expect(request.headers['content-type']).toBe('application/fhir+json')
      const bundle = new Webhook(secret).verify(request.body, request.headers as Record<string, string>) as Bundle
      expect(validate(bundle), firstErrors(validate)).toBe(true)
      return bundle
    }
    const resource = (bundle: Bundle, type: string) => bundle.entry.find((e) => e.resource.resourceType === type)!.resource
    const component = (observation: Record<string, any>, code: string) =>
      observation.component.find((c: any) => c.code.coding[0].code === code).valueQuantity

    it("delivered → completed, with an Observation of the trace: the delivery's own min, max, MKT and time out of range", async () => {
      // 5 °C, then 9 °C (above 8) for 12 minutes, then 5 °C again: an excursion, no break.
      const { receiver, pharmacy, deliveryId } = await carried([...Array(20).fill(5), ...Array(12).fill(9), ...Array(28).fill(5)])
      const delivered = await api.post(`/v1/deliveries/${deliveryId}/deliver`, admin, { verification: { method: 'otp', evidence: '1234' } })
      expect(delivered.status, delivered.text).toBe(200)
      const { cold_chain: figures } = delivered.body as {
        cold_chain: { min_c: number; max_c: number; mkt_c: number; time_out_of_range_s: number }
      }
      expect(figures).toMatchObject({ min_c: 5, max_c: 9 })
      expect(figures.time_out_of_range_s).toBeGreaterThan(0)

      const bundle = await bundleOf(receiver, pharmacy.secret)
      expect(resource(bundle, 'MedicationDispense').status).toBe('completed')
      const observation = resource(bundle, 'Observation')
      expect(observation).toMatchObject({ status: 'final', device: { identifier: { value: expect.stringMatching(/^tt_/) } } })
      expect(component(observation, 'min')).toEqual({ value: 5, unit: '°C', system: 'http://unitsofmeasure.org', code: 'Cel' })
      expect(component(observation, 'max')).toMatchObject({ value: 9, code: 'Cel' })
      expect(component(observation, 'mkt')).toMatchObject({ value: figures.mkt_c, code: 'Cel' })
      expect(component(observation, 'time-out-of-range')).toEqual({
        value: figures.time_out_of_range_s,
        unit: 's',
        system: 'http://unitsofmeasure.org',
        code: 's',
      })
      expect(observation.interpretation[0].coding[0].code).toBe('A')
    })

    it('returned after a broken cold chain → declined, and the Observation says why', async () => {
      // 40 minutes at 12 °C: longer than the refrigerated profile allows above 8 °C, so the chain breaks.
      const { receiver, pharmacy, deliveryId, driverId } = await carried([
        ...Array(10).fill(5),
        ...Array(40).fill(12),
        ...Array(10).fill(5),
      ])
      const before = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body
      expect(before.cold_chain).toMatchObject({ state: 'BROKEN', break_reason: 'excursion_too_long' })
      const returned = await api.post(`/v1/deliveries/${deliveryId}/return`, admin, {
        from: driverId,
        to: pharmacy.id,
        signature: 'took it back',
      })
      expect(returned.status, returned.text).toBe(200)
      const bundle = await bundleOf(receiver, pharmacy.secret)
      expect(resource(bundle, 'MedicationDispense')).toMatchObject({
        status: 'declined',
        statusReasonCodeableConcept: { text: 'Returned to the pharmacy after a broken cold chain (excursion_too_long)' },
      })
      expect(resource(bundle, 'Observation').interpretation[0]).toMatchObject({
        coding: [{ code: 'A' }],
        text: 'Cold chain broken (excursion_too_long)',
      })
      expect(component(resource(bundle, 'Observation'), 'max')).toMatchObject({ value: 12 })
    })
  })

describe('the FHIR R4 schema used as proof', () => {
  it('the example Bundle pasted in docs/interop.md validates', () => {
    const doc = readFileSync(new URL('../../docs/interop.md', import.meta.url), 'utf8')
    const block = /```json\n(\{\n {2}"resourceType": "Bundle"[\s\S]*?)\n```/.exec(doc)
    expect(block, 'a pasted Bundle in docs/interop.md').not.toBeNull()
    const bundle = JSON.parse(block![1]!) as Bundle
    expect(validate(bundle), firstErrors(validate)).toBe(true)
    expect(bundle.entry.map((e) => e.resource.resourceType)).toEqual(['MedicationDispense', 'Provenance', 'Provenance', 'Observation'])
  })

  it('refuses a Bundle with a member FHIR does not define, so a valid result means something', () => {
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [{ resource: { resourceType: 'MedicationDispense', status: 'completed', whenDelivered: 'x' } }],
    }
    expect(validate(bundle)).toBe(false)
    expect(validate({ resourceType: 'Bundle', type: 'not-a-bundle-type' })).toBe(false)
  })
})
