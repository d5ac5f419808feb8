import { afterEach, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'

/**
 * A process that dies after a POST committed its change but before its answer left: the client
 * never got the answer, so it retries with the same Idempotency-Key, and must get the answer of
 * the change that happened (stored, replayed) — not 409 "in progress" for a request nobody runs
 * any more, nor a second attempt refused as `invalid_transition`. `CRASH_AFTER_HANDLER` kills the
 * service with SIGKILL right after the handler of a matching POST has returned.
 */

const children: ChildService[] = []
afterEach(async () => {
  for (const child of children.splice(0).reverse()) await child.dispose()
})

type Answer = { status: number; replayed: string | null; text: string; body: any }

/** A POST over a real socket; `null` when the connection died without an answer. */
async function post(svc: ChildService, path: string, token: string, body: unknown, key: string): Promise<Answer | null> {
  try {
    const res = await fetch(svc.baseUrl + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, replayed: res.headers.get('idempotent-replayed'), text, body: JSON.parse(text) }
  } catch {
    return null
  }
}

function ok<T = any>(what: string, res: { status: number; body: T; text: string }): T {
  if (res.status !== 200 && res.status !== 201) throw new Error(`${what}: ${res.status} ${res.text}`)
  return res.body
}

/** Sends the POST that kills the service, waits for the death, starts it again on the same store. */
async function crashOn(svc: ChildService, path: string, token: string, body: unknown, key: string): Promise<ChildService> {
  expect(await post(svc, path, token, body, key)).toBeNull()
  expect((await svc.exited).signal).toBe('SIGKILL')
  const restarted = await svc.restart()
  children.push(restarted)
  return restarted
}

describe('an Idempotency-Key across a crash between the commit and the answer', () => {
  it('replays the stored answer of a driver registration and of a pickup after a SIGKILL, and did each once', async () => {
    let svc = await startChildService({ env: { CRASH_AFTER_HANDLER: '^/v1/fleets/[^/]+/drivers$|^/v1/deliveries/[^/]+/pickup$' } })
    children.push(svc)
    let token = await svc.adminToken()
    const pharmacy = ok(
      'pharmacy',
      await svc.post<{ id: string }>('/v1/pharmacies', token, {
        name: 'Crash Pharmacy',
        address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
      }),
    )
    const fleet = ok('fleet', await svc.post<{ id: string }>('/v1/fleets', token, { name: 'Crash Couriers' }))
    const rx = ok(
      'prescription',
      await svc.post<{ delivery_id: string }>(
        '/v1/prescriptions',
        token,
        { pharmacy_id: pharmacy.id, patient_id: 'pt_crash', cold_chain: false },
        { 'idempotency-key': 'crash-rx' },
      ),
    )

    // Another kind of POST: a creation (201).
    const driverPath = `/v1/fleets/${fleet.id}/drivers`
    const driverBody = { name: 'Dana Driver' }
    svc = await crashOn(svc, driverPath, token, driverBody, 'crash-driver')
    token = await svc.adminToken()
    const driver = await post(svc, driverPath, token, driverBody, 'crash-driver')
    expect(driver?.status, driver?.text).toBe(201)
    expect(driver?.replayed).toBe('true')
    const drivers = ok('drivers', await svc.get<{ data: { id: string }[] }>(`${driverPath}?limit=10`, token)).data
    expect(drivers.map((d) => d.id)).toEqual([driver!.body.id])

    // A delivery action (200), which a second attempt would refuse as invalid_transition.
    ok('dispatch', await svc.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, token, { fleet_id: fleet.id, driver_id: driver!.body.id }))
    const pickupPath = `/v1/deliveries/${rx.delivery_id}/pickup`
    const pickupBody = { from: pharmacy.id, to: driver!.body.id, signature: 'signed by the pharmacist' }
    svc = await crashOn(svc, pickupPath, token, pickupBody, 'crash-pickup')
    token = await svc.adminToken()
    const pickup = await post(svc, pickupPath, token, pickupBody, 'crash-pickup')
    expect(pickup?.status, pickup?.text).toBe(200)
    expect(pickup?.replayed).toBe('true')
    expect(pickup?.body.status).toBe('PICKED_UP')
    const delivery = ok('delivery', await svc.get<{ custody: { type: string }[] }>(`/v1/deliveries/${rx.delivery_id}`, token))
    expect(delivery.custody.map((e) => e.type)).toEqual(['created', 'dispatched', 'picked_up'])
    // The replay is the answer the pickup would have given: the delivery as that commit left it.
    expect(pickup?.body).toEqual(delivery)
  }, 240_000) // three starts of the service, each 3–5 s on an idle machine and much more on a busy one
})
