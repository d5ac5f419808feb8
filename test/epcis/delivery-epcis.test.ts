import mqtt from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MINUTE, testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { signedInPerson } from '../helpers/users.js'
import { waitFor } from '../helpers/wait.js'
import { expectValidEpcis } from './epcis-schema.js'

/**
 * docs/interop.md, EPCIS: `GET /v1/deliveries/{id}/epcis` over real HTTP, cold-chain readings over
 * real MQTT, and every document checked against GS1's EPCIS 2.0 JSON Schema.
 */

const GLN = '0614141000012'
/** Quick to judge: out of 2–8 °C for 30 min breaks it, no sensor-gap rule (the readings are a late upload). */
const PROFILE = {
  name: 'epcis-test',
  min_c: 2,
  max_c: 8,
  grace_s: 0,
  max_excursion_s: 1_800,
  max_cumulative_s: 3_600,
  hard_min_c: null,
  hard_max_c: null,
  mkt_max_c: null,
  max_gap_s: null,
}

type Event = Record<string, any>

describe('a delivery as an EPCIS 2.0 document', () => {
  let api: TestApi
  let base: string
  let mqttPort: number
  const clock = testClock()

  beforeAll(async () => {
    api = await startTestService({ PASSWORD_SCRYPT_LOG2_N: '10' }, { clock })
    const ports = await api.service.start()
    base = `http://127.0.0.1:${ports.httpPort}`
    mqttPort = ports.mqttPort
  })
  afterAll(() => api.stop())

  async function call(method: string, path: string, token: string, body?: unknown) {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    })
    const text = await res.text()
    return { status: res.status, headers: res.headers, text, body: text.startsWith('{') ? JSON.parse(text) : text }
  }
  const act = async (token: string, deliveryId: string, action: string, body: Record<string, unknown>) => {
    const res = await call('POST', `/v1/deliveries/${deliveryId}/${action}`, token, body)
    expect(res.status, res.text).toBe(200)
    return res.body
  }
  async function epcisOf(token: string, deliveryId: string) {
    const res = await call('GET', `/v1/deliveries/${deliveryId}/epcis`, token)
    expect(res.status, res.text).toBe(200)
    expect(res.headers.get('content-type')).toBe('application/ld+json')
    expectValidEpcis(res.body)
    return res.body as { epcisBody: { eventList: Event[] } } & Record<string, unknown>
  }
  const signature = 'data:image/png;base64,iVBORw0KGgo='

  it('names each handoff with its CBV step, the pharmacy by its GLN, the items as GTIN classes and SGTINs, and keeps the custody hash', async () => {
    clock.set(Date.now())
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin, { gln: GLN })
    const { fleetId, driverId, driver2Id } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, {
      pharmacy_id: pharmacy.id,
      items: [
        { description: 'Humalog 100 U/mL', ndc: '0002-8215-01', quantity: 2 },
        { description: 'Pen needles', gtin: '09521234543213', quantity: 2, serials: ['SN-1', 'A/B'] },
        { description: 'Leaflet', quantity: 1 },
      ],
    })
    const id = rx.delivery_id
    await act(admin, id, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
    await act(admin, id, 'pickup', { from: pharmacy.id, to: driverId, signature })
    await act(admin, id, 'handoff', { from: driverId, to: driver2Id, signature })
    const delivered = await act(admin, id, 'deliver', { verification: { method: 'otp', evidence: '123456' } })

    const document = await epcisOf(admin, id)
    expect(document).toMatchObject({ type: 'EPCISDocument', schemaVersion: '2.0' })
    const events = document.epcisBody.eventList
    expect(events.map((e) => [e.bizStep, e.disposition])).toEqual([
      ['shipping', 'in_transit'],
      ['transporting', 'in_transit'],
      ['dispensing', 'dispensed'],
    ])
    const handoffs = delivered.custody.filter((c: { type: string }) => ['picked_up', 'handoff', 'delivered'].includes(c.type))
    expect(events.map((e) => e['rxtrace:custodyHash'])).toEqual(handoffs.map((c: { hash: string }) => c.hash))
    expect(events.map((e) => e.eventTime)).toEqual(handoffs.map((c: { occurred_at: string }) => c.occurred_at))
    for (const event of events) {
      expect(event.readPoint).toEqual({ id: 'urn:epc:id:sgln:0614141.00001.0' })
      // America/Chicago: CST in winter, CDT in summer.
      expect(event.eventTimeZoneOffset).toMatch(/^-0[56]:00$/)
      // NDC 0002-8215-01 → GTIN 00300028215012 (company prefix 03 + labeler 0002); the leaflet has no identifier.
      expect(event.quantityList).toEqual([{ epcClass: 'urn:epc:idpat:sgtin:030002.0821501.*', quantity: 2 }])
      expect(event.epcList).toEqual(['urn:epc:id:sgtin:9521234.054321.SN-1', 'urn:epc:id:sgtin:9521234.054321.A%2FB'])
      expect(event.sensorElementList).toBeUndefined()
    }
  })

  it('refuses a GLN or GTIN whose check digit is wrong, and serials that do not match the quantity', async () => {
    clock.set(Date.now())
    const admin = await api.adminToken()
    const badGln = await call('POST', '/v1/pharmacies', admin, {
      name: 'Typo Pharmacy',
      gln: '0614141000013',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    expect(badGln.status).toBe(422)
    expect(badGln.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/gln'])
    const pharmacy = await api.pharmacy(admin)
    const badChange = await call('PATCH', `/v1/pharmacies/${pharmacy.id}`, admin, { gln: '0614141000013' })
    expect(badChange.status).toBe(422)
    expect(badChange.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/gln'])
    const changed = await call('PATCH', `/v1/pharmacies/${pharmacy.id}`, admin, { gln: GLN })
    expect(changed.status, changed.text).toBe(200)
    expect(changed.body.gln).toBe(GLN)
    const removed = await call('PATCH', `/v1/pharmacies/${pharmacy.id}`, admin, { gln: null })
    expect(removed.body.gln).toBeNull()
    const res = await fetch(`${base}/v1/prescriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json', 'idempotency-key': `bad-${Math.random()}` },
      body: JSON.stringify({
        patient_id: 'pt_1',
        cold_chain: false,
        items: [
          { description: 'a', gtin: '09521234543214', quantity: 1 },
          { description: 'b', gtin: '09521234543213', quantity: 2, serials: ['only-one'] },
        ],
      }),
    })
    expect(res.status).toBe(422)
    const problem = (await res.json()) as { errors: { pointer: string }[] }
    expect(problem.errors.map((e) => e.pointer).sort()).toEqual(['/items/0/gtin', '/items/1/serials'])
  })

  it('says a returned delivery is back at the pharmacy: receiving, returned, at its URL when it has no GLN', async () => {
    clock.set(Date.now())
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, items: [{ description: 'x', ndc: '50090-123-45', quantity: 1 }] })
    await act(admin, rx.delivery_id, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
    await act(admin, rx.delivery_id, 'pickup', { from: pharmacy.id, to: driverId, signature })
    await act(admin, rx.delivery_id, 'fail', { reason: 'patient_unavailable', note: 'patient not at home' })
    await act(admin, rx.delivery_id, 'return', { from: driverId, to: pharmacy.id, signature })

    const events = (await epcisOf(admin, rx.delivery_id)).epcisBody.eventList
    expect(events.map((e) => [e.bizStep, e.disposition])).toEqual([
      ['shipping', 'in_transit'],
      ['receiving', 'returned'],
    ])
    const place = { id: `http://rxtrace.test/v1/pharmacies/${pharmacy.id}` }
    expect(events[1]).toMatchObject({ readPoint: place, bizLocation: place })
    expect(events[0]!.bizLocation).toBeUndefined()
    expect(events[0]!.quantityList).toEqual([{ epcClass: 'urn:epc:idpat:sgtin:0350090.012345.*', quantity: 1 }])
  })

  /**
   * A cold-chain delivery dispatched 30 min ago whose tote uploads its readings late over MQTT;
   * the driver's app then records the pickup, a handoff and the delivery with their real times.
   */
  async function coldChainDelivery(profile: Record<string, unknown>, temperatureAt: (minute: number) => number, lastMinute: number) {
    const t0 = Date.now() - 30 * MINUTE
    clock.set(t0 - MINUTE)
    let admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId, driver2Id } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, {
      pharmacy_id: pharmacy.id,
      cold_chain: true,
      temperature_profile: profile,
      items: [{ description: 'Insulin', ndc: '0002-8215-01', quantity: 1 }],
    })
    clock.set(t0 + 1_000)
    await act(admin, rx.delivery_id, 'dispatch', { fleet_id: fleetId, tote_id: tote.id, occurred_at: new Date(t0).toISOString() })
    clock.set(Date.now())
    admin = await api.adminToken()

    // Every 30 s from the dispatch on, as one gateway batch, QoS 1: the PUBACK means stored.
    const readings = Array.from({ length: lastMinute * 2 + 1 }, (_, i) => ({ ts: t0 + i * 30_000, temp_c: temperatureAt(i / 2) }))
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: tote.mqtt.username,
      password: tote.mqtt.password,
      clientId: tote.id,
      reconnectPeriod: 0,
    })
    await client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify(readings), { qos: 1 })
    await client.endAsync()
    const at = (minute: number) => new Date(t0 + minute * MINUTE).toISOString()
    return { admin, pharmacy, tote, deliveryId: rx.delivery_id, driverId, driver2Id, at, readings }
  }

  it('reports the readings between handoffs with min, max and mean, and an ALARM_CONDITION per excursion, linking the trace', async () => {
    // 5 °C, except 12 °C from minute 8 to 9: an excursion the profile tolerates.
    const delivery = await coldChainDelivery(PROFILE, (m) => (m >= 8 && m <= 9 ? 12 : 5), 20)
    const { admin, deliveryId, pharmacy, driverId, driver2Id, at } = delivery
    await waitFor(
      async () => {
        const d = (await call('GET', `/v1/deliveries/${deliveryId}`, admin)).body
        return d.cold_chain.excursions.length === 1 && d.cold_chain.excursions[0].ended_at !== null && d.cold_chain.max_c === 12
      },
      10_000,
      'the excursion judged',
    )
    await act(admin, deliveryId, 'pickup', { from: pharmacy.id, to: driverId, signature, occurred_at: at(5) })
    await act(admin, deliveryId, 'handoff', { from: driverId, to: driver2Id, signature, occurred_at: at(12) })
    await act(admin, deliveryId, 'deliver', { verification: { method: 'otp', evidence: '1' }, occurred_at: at(21) })

    const events = (await epcisOf(admin, deliveryId)).epcisBody.eventList
    expect(events.map((e) => e.bizStep)).toEqual(['shipping', 'transporting', 'dispensing'])
    const sensors = events.map((e) => e.sensorElementList[0])
    expect(sensors.map((s) => [s.sensorMetadata.startTime, s.sensorMetadata.endTime])).toEqual([
      [at(0), at(5)],
      [at(5), at(12)],
      [at(12), at(21)],
    ])
    const temperature = (s: Event) => s.sensorReport.find((r: Event) => !r.exception)
    const alarms = (s: Event) => s.sensorReport.filter((r: Event) => r.exception === 'ALARM_CONDITION')
    // [0, 5): ten readings at 5 °C. [5, 12): fourteen, three of them 12 °C. [12, 21): the rest, 5 °C.
    expect(temperature(sensors[0])).toEqual({
      type: 'gs1:Temperature',
      uom: 'CEL',
      minValue: 5,
      maxValue: 5,
      meanValue: 5,
      'rxtrace:readings': 10,
    })
    expect(temperature(sensors[1])).toMatchObject({ minValue: 5, maxValue: 12, meanValue: 6.5, 'rxtrace:readings': 14 })
    expect(temperature(sensors[2])).toMatchObject({ minValue: 5, maxValue: 5, 'rxtrace:readings': 17 })
    expect(sensors.map((s) => alarms(s).length)).toEqual([0, 1, 0])
    expect(alarms(sensors[1])[0]).toMatchObject({ type: 'gs1:Temperature', value: 12, uom: 'CEL', time: at(8) })
    for (const s of sensors) expect(s.sensorMetadata.deviceID).toBe(`http://rxtrace.test/v1/totes/${delivery.tote.id}`)

    // rawData is the trace of the interval: its CSV counts the interval's readings.
    const raw = new URL(sensors[1].sensorMetadata.rawData)
    const csv = await fetch(base + raw.pathname + raw.search, { headers: { authorization: `Bearer ${admin}`, accept: 'text/csv' } })
    expect(csv.status).toBe(200)
    const rows = (await csv.text()).trim().split('\r\n').slice(1)
    expect(rows.reduce((n, row) => n + Number(row.split(',')[4]), 0)).toBe(15) // [5, 12] closed: the reading at 12:00 too
  }, 30_000)

  it('calls a broken cold chain taken back by the pharmacist damaged, with the alarm in the last leg', async () => {
    // 15 °C from minute 6 to 8 with a 60 s allowance: broken.
    const delivery = await coldChainDelivery({ ...PROFILE, max_excursion_s: 60 }, (m) => (m >= 6 && m <= 8 ? 15 : 5), 10)
    const { admin, deliveryId, pharmacy, driverId, at } = delivery
    await waitFor(
      async () => (await call('GET', `/v1/deliveries/${deliveryId}`, admin)).body.cold_chain.state === 'BROKEN',
      10_000,
      'the break',
    )
    await act(admin, deliveryId, 'pickup', { from: pharmacy.id, to: driverId, signature, occurred_at: at(5) })
    const pharmacist = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: pharmacy.id })
    await act(pharmacist.token, deliveryId, 'disposition', {
      decision: 'return',
      note: 'two minutes at 15 °C',
      signature: { meaning: 'returned', password: pharmacist.password },
    })
    // The signed decision is recorded now, so the return follows it now.
    await act(admin, deliveryId, 'return', { from: driverId, to: pharmacy.id, signature })

    const events = (await epcisOf(admin, deliveryId)).epcisBody.eventList
    expect(events.map((e) => [e.bizStep, e.disposition])).toEqual([
      ['shipping', 'in_transit'],
      ['receiving', 'damaged'],
    ])
    const last = events[1]!.sensorElementList[0]
    expect(last.sensorMetadata).toMatchObject({ startTime: at(5), endTime: events[1]!.eventTime })
    expect(last.sensorReport.filter((r: Event) => r.exception === 'ALARM_CONDITION')).toEqual([
      expect.objectContaining({ value: 15, time: at(6), 'rxtrace:excursionKind': expect.any(String) }),
    ])
    expect(last.sensorReport[0]).toMatchObject({ minValue: 5, maxValue: 15 })
  }, 30_000)

  it('gives a redelivered leg its own document, and leaves the returned leg’s as it was', async () => {
    clock.set(Date.now())
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const pharmacist = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: pharmacy.id })
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, items: [{ description: 'x', ndc: '0002-8215-01', quantity: 1 }] })
    const first = rx.delivery_id
    await act(admin, first, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
    await act(admin, first, 'pickup', { from: pharmacy.id, to: driverId, signature })
    await act(admin, first, 'fail', { reason: 'patient_unavailable', note: 'not home' })
    await act(admin, first, 'return', { from: driverId, to: pharmacy.id, signature })
    const before = await epcisOf(admin, first)
    await act(pharmacist.token, first, 'disposition', {
      decision: 'release',
      note: 'sealed, never left 2–8 °C',
      signature: { meaning: 'released', password: pharmacist.password },
    })
    const redelivered = await fetch(`${base}/v1/prescriptions/${rx.rx_id}/redeliver`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'idempotency-key': `leg-${Math.random()}` },
    })
    expect(redelivered.status).toBe(201)
    const second = ((await redelivered.json()) as { id: string; leg: number }).id
    await act(admin, second, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
    await act(admin, second, 'pickup', { from: pharmacy.id, to: driverId, signature })
    await act(admin, second, 'deliver', { verification: { method: 'otp', evidence: '1' } })

    const leg2 = (await epcisOf(admin, second)).epcisBody.eventList
    expect(leg2.map((e) => [e.bizStep, e.disposition])).toEqual([
      ['shipping', 'in_transit'],
      ['dispensing', 'dispensed'],
    ])
    expect(leg2.every((e) => e['rxtrace:deliveryId'] === second)).toBe(true)
    const leg1 = (await epcisOf(admin, first)).epcisBody.eventList
    expect(leg1).toEqual(before.epcisBody.eventList)
    expect(leg1.map((e) => e.disposition)).toEqual(['in_transit', 'returned'])
  })

  it('answers 404 for a delivery of another tenant, and 403 without deliveries:read', async () => {
    clock.set(Date.now())
    const admin = await api.adminToken()
    const mine = await api.pharmacy(admin)
    const theirs = await api.pharmacy(admin)
    const client = await call('POST', '/v1/oauth/clients', admin, { client_name: 'epcis', scope: 'deliveries:read', pharmacy_id: mine.id })
    const token = await api.tokenFor(client.body.client_id, client.body.client_secret)
    const other = await api.prescription(admin, { pharmacy_id: theirs.id })
    expect((await call('GET', `/v1/deliveries/${other.delivery_id}/epcis`, token)).status).toBe(404)
    const telemetryOnly = await call('POST', '/v1/oauth/clients', admin, {
      client_name: 't',
      scope: 'telemetry:read',
      pharmacy_id: mine.id,
    })
    const weak = await api.tokenFor(telemetryOnly.body.client_id, telemetryOnly.body.client_secret)
    expect((await call('GET', `/v1/deliveries/${other.delivery_id}/epcis`, weak)).status).toBe(403)
  })
})
