import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { signedInPerson } from '../helpers/users.js'
import { httpClient, QUICK_PROFILE, toteClient, type Http, type Tote } from './http.js'

/**
 * Alarms (docs/api.md, Alarms) over real HTTP and real MQTT readings, on SQLite and PostgreSQL:
 * an excursion is an alarm a person acknowledges with a note; the alarm and its state outlive a
 * restart; one nobody acknowledges is escalated once.
 */
const { url } = await reachablePostgres()
const schemas = postgresSchemas(url ?? 'postgres://unreachable')
const running: TestApi[] = []
const closers: (() => Promise<unknown>)[] = []
const dirs: string[] = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close().catch(() => {})
  for (const api of running.splice(0)) await api.stop()
})
afterAll(async () => {
  await schemas.drop()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

type Store = { name: string; open(): Promise<() => Promise<{ api: TestApi; http: Http; mqttPort: number }>> }
const stores: Store[] = [
  {
    name: 'sqlite',
    async open() {
      const dir = mkdtempSync(join(tmpdir(), 'rxtrace-alarms-'))
      dirs.push(dir)
      return () =>
        started({ store: { kind: 'sqlite', file: join(dir, 'rxtrace.db') }, sink: createSqliteSink({ path: join(dir, 'readings.db') }) })
    },
  },
  ...(url
    ? [
        {
          name: 'postgres',
          async open() {
            const schema = await schemas.create()
            return () => started({ store: { kind: 'postgres' as const, url, schema }, sink: undefined })
          },
        },
      ]
    : []),
]

/** A service on `store` (the same store again after a restart), listening on real ports. */
async function started(overrides: Parameters<typeof startTestService>[1]) {
  const api = await startTestService({}, overrides)
  running.push(api)
  const { httpPort, mqttPort } = await api.service.start()
  return { api, http: httpClient(httpPort), mqttPort }
}

type Alarm = { id: string; state: string; kind: string; note: string | null; acknowledged_by: string | null; cleared_at: string | null }

async function dispatchedColdChain(api: TestApi, http: Http, token: string, pharmacyExtra: Record<string, unknown> = {}) {
  const pharmacy = await api.pharmacy(token, pharmacyExtra)
  const { fleetId } = await api.fleetWithDriver(token)
  const tote = (await api.tote(token, { pharmacy_id: pharmacy.id })) as Tote
  const rx = await api.prescription(token, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: QUICK_PROFILE })
  const res = await http('POST', `/v1/deliveries/${rx.delivery_id}/dispatch`, token, { fleet_id: fleetId, tote_id: tote.id })
  expect(res.status, res.text).toBe(200)
  return { pharmacyId: pharmacy.id, tote, deliveryId: rx.delivery_id as string }
}

const alarmsOf = async (http: Http, token: string, deliveryId: string, state?: string) => {
  const res = await http<{ data: Alarm[] }>('GET', `/v1/alarms?delivery_id=${deliveryId}${state ? `&state=${state}` : ''}`, token)
  expect(res.status, res.text).toBe(200)
  return res.body.data
}

describe.each(stores)('alarms on $name', (store) => {
  it('a break is an alarm that only the pharmacist’s signed disposition clears', async () => {
    const open = await store.open()
    const { api, http, mqttPort } = await open()
    const token = await api.adminToken()
    const { pharmacyId, tote, deliveryId } = await dispatchedColdChain(api, http, token)
    const sensor = await toteClient(mqttPort, tote)
    closers.push(sensor.end)
    await sensor.send(5)
    await sensor.send(31) // past the profile's hard maximum (30 °C): the cold chain breaks
    await sensor.send(5) // back in range: an excursion clears by itself, a break does not
    await sensor.end()
    const breakAlarm = async () => (await alarmsOf(http, token, deliveryId)).find((a) => a.kind === 'break')
    await vi.waitFor(async () => expect(await breakAlarm()).toMatchObject({ state: 'ACTIVE_UNACK' }), { timeout: 10_000, interval: 50 })
    const { id } = (await breakAlarm())!
    const acked = await http<Alarm>('POST', `/v1/alarms/${id}/acknowledge`, token, { note: 'Calling the driver' })
    expect(acked.body.state, acked.text).toBe('ACTIVE_ACK')

    const pharmacist = await signedInPerson(api, token, { role: 'pharmacist', pharmacy_id: pharmacyId })
    const decided = await api.post(
      `/v1/deliveries/${deliveryId}/disposition`,
      pharmacist.token,
      { decision: 'return', note: 'Overheated in transit', signature: { meaning: 'returned', password: pharmacist.password } },
      { 'idempotency-key': `alarm-disposition-${deliveryId}` },
    )
    expect(decided.status, decided.text).toBe(200)
    expect(await breakAlarm()).toMatchObject({ state: 'CLEARED_ACK', cleared_at: expect.any(String) })
    const active = await alarmsOf(http, token, deliveryId)
    expect(active.filter((a) => a.state.startsWith('ACTIVE'))).toEqual([])
  }, 60_000)

  it('an excursion is an alarm acknowledged with a note, cleared by the recovery, and still there after a restart', async () => {
    const open = await store.open()
    let { api, http, mqttPort } = await open()
    let token = await api.adminToken()
    const { tote, deliveryId } = await dispatchedColdChain(api, http, token)
    const sensor = await toteClient(mqttPort, tote)
    closers.push(sensor.end)

    await sensor.send(5)
    await sensor.send(11) // out of range; with no grace the next reading still out makes it an excursion
    await sensor.send(11)
    await vi.waitFor(async () => expect(await alarmsOf(http, token, deliveryId)).toHaveLength(1), { timeout: 10_000, interval: 50 })
    const [raised] = await alarmsOf(http, token, deliveryId)
    expect(raised).toMatchObject({ kind: 'excursion', state: 'ACTIVE_UNACK', acknowledged_by: null, note: null })

    const noNote = await http('POST', `/v1/alarms/${raised!.id}/acknowledge`, token, {})
    expect(noNote.status).toBe(422)
    expect(noNote.body.errors).toEqual([expect.objectContaining({ pointer: '/note' })])

    const acked = await http<Alarm>('POST', `/v1/alarms/${raised!.id}/acknowledge`, token, {
      note: 'Driver moved the tote into the cooler',
    })
    expect(acked.status, acked.text).toBe(200)
    expect(acked.body).toMatchObject({ state: 'ACTIVE_ACK', note: 'Driver moved the tote into the cooler', acknowledged_by: 'cl_admin' })
    const again = await http('POST', `/v1/alarms/${raised!.id}/acknowledge`, token, { note: 'twice' })
    expect(again.status).toBe(409)

    await sensor.send(5) // back in range: the excursion recovered
    await vi.waitFor(async () => expect((await alarmsOf(http, token, deliveryId))[0]!.state).toBe('CLEARED_ACK'), {
      timeout: 10_000,
      interval: 50,
    })

    // A second excursion nobody sees before it ends: CLEARED_UNACK, then acknowledged late.
    await sensor.send(12)
    await sensor.send(12)
    await vi.waitFor(async () => expect(await alarmsOf(http, token, deliveryId)).toHaveLength(2), { timeout: 10_000, interval: 50 })
    await sensor.send(6)
    await vi.waitFor(async () => expect(await alarmsOf(http, token, deliveryId, 'CLEARED_UNACK')).toHaveLength(1), {
      timeout: 10_000,
      interval: 50,
    })
    await sensor.end()

    // A restart (a new service on the same store) has every alarm as it was left.
    const before = await alarmsOf(http, token, deliveryId)
    await api.stop()
    running.splice(running.indexOf(api), 1)
    ;({ api, http, mqttPort } = await open())
    token = await api.adminToken()
    expect(await alarmsOf(http, token, deliveryId)).toEqual(before)
    const unseen = before.find((a) => a.state === 'CLEARED_UNACK')!
    const late = await http<Alarm>('POST', `/v1/alarms/${unseen.id}/acknowledge`, token, { note: 'Reviewed the trace: 4 minutes at 12 °C' })
    expect(late.body.state).toBe('CLEARED_ACK')
    const closed = await http('POST', `/v1/alarms/${unseen.id}/assign`, token, { user: 'us_nobody' })
    expect(closed.status).toBe(422)
  }, 60_000)

  it('an alarm nobody acknowledges within the pharmacy’s escalate_after_s emits alarm.escalated once, also across a restart', async () => {
    const open = await store.open()
    let { api, http, mqttPort } = await open()
    let token = await api.adminToken()
    const { tote, deliveryId } = await dispatchedColdChain(api, http, token, { escalate_after_s: 1 })
    const sensor = await toteClient(mqttPort, tote)
    closers.push(sensor.end)
    await sensor.send(14)
    await sensor.send(14)
    const escalations = async () => {
      const res = await http<{ data: { type: string; data: { alarm_id: string; state: string } }[] }>(
        'GET',
        `/v1/events?delivery_id=${deliveryId}&limit=100`,
        token,
      )
      return res.body.data.filter((e) => e.type === 'alarm.escalated')
    }
    await vi.waitFor(async () => expect(await escalations()).toHaveLength(1), { timeout: 15_000, interval: 100 })
    const [alarm] = await alarmsOf(http, token, deliveryId)
    expect((await escalations())[0]!.data).toMatchObject({ alarm_id: alarm!.id, state: 'ACTIVE_UNACK' })
    expect(alarm!.state).toBe('ACTIVE_UNACK')
    await sensor.end()

    await api.stop()
    running.splice(running.indexOf(api), 1)
    ;({ api, http, mqttPort } = await open())
    token = await api.adminToken()
    // Several escalation sweeps of the new process later, still the one event.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    expect(await escalations()).toHaveLength(1)
  }, 60_000)
})
