import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'
import type { TestApi } from '../helpers/service.js'
import { httpClient } from './http.js'

/**
 * Calibrated sensors (docs/api.md, Totes: sensor and calibration) over real HTTP on SQLite and
 * PostgreSQL: a tote's sensor record, and a cold-chain dispatch with a tote past its calibration
 * refused or, under the pharmacy's `warn`, carried as a warning.
 */
const { url } = await reachablePostgres()
const stores: StoreUnderTest[] = [sqliteStore, ...(url ? [postgresStore(url)] : [])]
const running: TestApi[] = []
afterEach(async () => {
  for (const api of running.splice(0)) await api.stop()
})
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

const DAY = 86_400_000
const sensorDue = (dueInDays: number) => ({
  serial: 'TS-4471',
  model: 'ColdProbe 3',
  accuracy_c: 0.3,
  calibrated_at: new Date(Date.now() - 360 * DAY).toISOString(),
  calibration_due: new Date(Date.now() + dueInDays * DAY).toISOString(),
  certificate_ref: 'DAkkS D-K-15070-01-00/2025-118',
})

describe.each(stores)('tote sensors on $name', (store) => {
  async function world(pharmacyExtra: Record<string, unknown> = {}) {
    const api = await store.start()
    running.push(api)
    const { httpPort } = await api.service.start()
    const http = httpClient(httpPort)
    const token = await api.adminToken()
    const pharmacy = await api.pharmacy(token, pharmacyExtra)
    const { fleetId } = await api.fleetWithDriver(token)
    const tote = await api.tote(token, { pharmacy_id: pharmacy.id })
    const dispatch = async () => {
      const rx = await api.prescription(token, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
      return http('POST', `/v1/deliveries/${rx.delivery_id}/dispatch`, token, { fleet_id: fleetId, tote_id: tote.id })
    }
    return { api, http, token, pharmacy, tote, dispatch }
  }

  it('records a tote’s sensor, refusing a record that makes no sense with a pointer to the field', async () => {
    const { http, token, tote } = await world()
    const bad = await http('PATCH', `/v1/totes/${tote.id}`, token, {
      sensor: { ...sensorDue(30), accuracy_c: -1, calibration_due: 'next year', certificate_ref: '' },
    })
    expect(bad.status).toBe(422)
    expect(bad.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual([
      '/sensor/accuracy_c',
      '/sensor/calibration_due',
      '/sensor/certificate_ref',
    ])
    const backwards = await http('PATCH', `/v1/totes/${tote.id}`, token, {
      sensor: { ...sensorDue(30), calibrated_at: new Date(Date.now() + 60 * DAY).toISOString() },
    })
    expect(backwards.status).toBe(422)
    expect(backwards.body.errors).toEqual([expect.objectContaining({ pointer: '/sensor/calibration_due' })])

    const sensor = sensorDue(30)
    const ok = await http('PATCH', `/v1/totes/${tote.id}`, token, { sensor })
    expect(ok.status, ok.text).toBe(200)
    expect((await http('GET', `/v1/totes/${tote.id}`, token)).body.sensor).toEqual(sensor)
  })

  it('refuses a cold-chain dispatch with a tote past its calibration (409 sensor_calibration_due), and dispatches one in calibration', async () => {
    const { http, token, tote, dispatch } = await world()
    await http('PATCH', `/v1/totes/${tote.id}`, token, { sensor: sensorDue(-1) })
    const refused = await dispatch()
    expect(refused.status).toBe(409)
    expect(refused.body).toMatchObject({ code: 'sensor_calibration_due', errors: [{ pointer: '/tote_id' }] })

    await http('PATCH', `/v1/totes/${tote.id}`, token, { sensor: sensorDue(30) })
    const dispatched = await dispatch()
    expect(dispatched.status, dispatched.text).toBe(200)
    expect(dispatched.body.warnings).toBeUndefined()
  })

  it('under the pharmacy’s warn policy dispatches it and the delivery carries the warning', async () => {
    const { http, token, pharmacy, tote, dispatch } = await world()
    await http('PATCH', `/v1/totes/${tote.id}`, token, { sensor: sensorDue(-1) })
    const policy = await http('PATCH', `/v1/pharmacies/${pharmacy.id}`, token, { calibration_policy: 'warn', escalate_after_s: 600 })
    expect(policy.status, policy.text).toBe(200)
    expect(policy.body).toMatchObject({ calibration_policy: 'warn', escalate_after_s: 600 })
    const badPolicy = await http('PATCH', `/v1/pharmacies/${pharmacy.id}`, token, { calibration_policy: 'sometimes' })
    expect(badPolicy.body.errors).toEqual([expect.objectContaining({ pointer: '/calibration_policy' })])

    const dispatched = await dispatch()
    expect(dispatched.status, dispatched.text).toBe(200)
    expect(dispatched.body.warnings).toEqual([expect.objectContaining({ code: 'sensor_calibration_due', sensor_serial: 'TS-4471' })])
    const delivery = await http('GET', `/v1/deliveries/${dispatched.body.id}`, token)
    expect(delivery.body.warnings).toEqual(dispatched.body.warnings)
  })

  it('a tote with no sensor record is a warning by default and refused under strict', async () => {
    const { http, token, pharmacy, dispatch } = await world()
    const warned = await dispatch()
    expect(warned.status, warned.text).toBe(200)
    expect(warned.body.warnings).toEqual([expect.objectContaining({ code: 'sensor_unrecorded', sensor_serial: null })])
    await http('PATCH', `/v1/pharmacies/${pharmacy.id}`, token, { calibration_policy: 'strict' })
    expect((await dispatch()).body.code).toBe('sensor_calibration_due')
  })
})
