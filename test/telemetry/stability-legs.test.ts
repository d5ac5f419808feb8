import mqtt, { type MqttClient } from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MINUTE, testClock } from '../helpers/clock.js'
import { publishPaced } from '../helpers/paced-readings.js'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'
import { signedInPerson, signedInToken } from '../helpers/users.js'

/**
 * Legs (docs/stability.md, Redelivery): a returned delivery that a person released goes out again as
 * leg n + 1 of the same prescription, and its stability ledger starts from what the earlier legs
 * consumed, so the same warm spell exhausts it sooner. Requests over real HTTP; readings published by
 * a real MQTT client to the embedded broker; on SQLite and PostgreSQL (the legs are rows of both).
 */

// One hour allowed between 8 and 25 °C.
const STABILITY = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [{ min_c: 8, max_c: 25, allowed_s: 3600 }],
  freeze_thaw_max: 0,
  source: 'test data',
}
const NDC = '00002-8215-01'
const START = Date.parse('2026-11-20T15:00:00.000Z')
const SIGNATURE = 'data:image/png;base64,AAAA'

const { url } = await reachablePostgres()
const stores = [sqliteStore, ...(url ? [postgresStore(url)] : [])]
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

for (const store of stores)
  describe(`legs of a prescription on ${store.name}`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let mqttPort: number
    let carrier: { fleetId: string; driverId: string }
    let pharmacyId: string
    let pharmacist: string
    let pharmacistPassword: string
    const clock = testClock(START)
    const clients: MqttClient[] = []
    let key = 0

    async function http(method: string, path: string, token: string, body?: unknown) {
      const res = await fetch(base + path, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(method === 'POST' ? { 'idempotency-key': `k-${store.name}-${++key}` } : {}),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      return { status: res.status, body: text ? JSON.parse(text) : null, text }
    }

    beforeAll(async () => {
      api = await store.start({ TOKEN_TTL_S: '86400', PASSWORD_SCRYPT_LOG2_N: '10' }, { clock })
      const ports = await api.service.start()
      base = `http://127.0.0.1:${ports.httpPort}`
      mqttPort = ports.mqttPort
      admin = await api.adminToken()
      carrier = await api.fleetWithDriver(admin)
      pharmacyId = (await api.pharmacy(admin)).id
      const person = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: pharmacyId })
      pharmacist = person.token
      pharmacistPassword = person.password
      const product = await http('POST', '/v1/products', admin, {
        ndc: NDC,
        name: 'Insulin',
        pharmacy_id: pharmacyId,
        stability: STABILITY,
      })
      expect(product.status, product.text).toBe(201)
    })
    afterAll(async () => {
      for (const c of clients) await c.endAsync().catch(() => undefined)
      await api.stop()
    })

    /** Dispatches and picks up `deliveryId` with a new tote, and publishes one reading a minute at `temps`. */
    async function ride(deliveryId: string, temps: number[]) {
      const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
      const dispatchedAt = clock.now()
      const dispatched = await http('POST', `/v1/deliveries/${deliveryId}/dispatch`, admin, {
        fleet_id: carrier.fleetId,
        driver_id: carrier.driverId,
        tote_id: tote.id,
      })
      expect(dispatched.status, dispatched.text).toBe(200)
      const picked = await http('POST', `/v1/deliveries/${deliveryId}/pickup`, admin, {
        from: pharmacyId,
        to: carrier.driverId,
        signature: SIGNATURE,
      })
      expect(picked.status, picked.text).toBe(200)
      const firstTs = dispatchedAt + 1_000
      const readings = temps.map((temp_c, i) => ({ ts: firstTs + i * MINUTE, temp_c }))
      const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
        username: tote.mqtt.username,
        password: tote.mqtt.password,
        clientId: tote.id,
        reconnectPeriod: 0,
      })
      clients.push(client)
      /** Sends the readings as the clock moves along them, then moves it a minute past the last. */
      const publish = async (list: { ts: number; temp_c: number }[]) => {
        const end = clock.now() + list.length * MINUTE + MINUTE
        await publishPaced(client, tote.id, list, clock)
        clock.set(end)
        await api.service.monitor.flush()
      }
      await publish(readings)
      /** More readings a minute apart, after the last. */
      const more = async (next: number[]) => {
        const from = readings.at(-1)!.ts + MINUTE
        const list = next.map((temp_c, i) => ({ ts: from + i * MINUTE, temp_c }))
        readings.push(...list)
        await publish(list)
      }
      return { firstTs, more }
    }

    const returnIt = (deliveryId: string) =>
      http('POST', `/v1/deliveries/${deliveryId}/return`, admin, { from: carrier.driverId, to: pharmacyId, signature: SIGNATURE })
    const assess = (deliveryId: string, token: string, body: Record<string, unknown>, key?: string) =>
      fetch(`${base}/v1/deliveries/${deliveryId}/assessments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key ?? `as-${Math.random()}` },
        body: JSON.stringify(body),
      }).then(async (res) => ({ status: res.status, headers: res.headers, body: await res.json() }))
    const redeliver = (rxId: string, token = admin) => http('POST', `/v1/prescriptions/${rxId}/redeliver`, token)
    /** A disposition as a pharmacist records it: signed with the password (docs/part11.md). */
    const dispose = (deliveryId: string, decision: 'release' | 'return', note: string, token = pharmacist) =>
      http('POST', `/v1/deliveries/${deliveryId}/disposition`, token, {
        decision,
        note,
        signature: { meaning: decision === 'release' ? 'released' : 'returned', password: pharmacistPassword },
      })
    const get = async (deliveryId: string) => (await http('GET', `/v1/deliveries/${deliveryId}`, admin)).body

    it('starts leg 2 from what leg 1 consumed, so the same warm spell exhausts it sooner', async () => {
      const rx = await api.prescription(admin, {
        pharmacy_id: pharmacyId,
        cold_chain: true,
        items: [{ description: 'Insulin', ndc: NDC, quantity: 1 }],
      })
      const leg1 = rx.delivery_id
      // 41 minutes at 12 °C: within the hour (and, under auto_within_budget, not a break).
      await ride(leg1, [5, ...Array.from({ length: 41 }, () => 12), 5])
      const afterLeg1 = await get(leg1)
      expect(afterLeg1.cold_chain.state).not.toBe('BROKEN')
      expect(afterLeg1.stability.items[0].bands[0].consumed_s).toBe(41 * 60)
      expect((await returnIt(leg1)).status).toBe(200)

      const released = await dispose(leg1, 'release', 'tote intact, stability OK')
      expect(released.status, released.text).toBe(200)
      const leg2 = await redeliver(rx.rx_id)
      expect(leg2.status, leg2.text).toBe(201)
      expect(leg2.body).toMatchObject({ rx_id: rx.rx_id, leg: 2, status: 'QUEUED', tote_id: null })
      expect(leg2.body.id).not.toBe(leg1)
      expect(leg2.body.stability.legs).toEqual([leg1, leg2.body.id])
      expect(leg2.body.stability.items[0].bands[0]).toMatchObject({ consumed_s: 41 * 60, remaining_s: 3600 - 41 * 60 })
      expect((await http('GET', `/v1/prescriptions/${rx.rx_id}`, admin)).body).toMatchObject({
        delivery_id: leg2.body.id,
        status: 'QUEUED',
      })

      // 30 minutes at 12 °C: alone well within the hour; after leg 1's 41 minutes, exhausted 19 minutes in.
      const { firstTs } = await ride(leg2.body.id, [5, ...Array.from({ length: 30 }, () => 12), 5])
      const after = await get(leg2.body.id)
      expect(after.leg).toBe(2)
      expect(after.cold_chain).toMatchObject({ state: 'BROKEN', break_reason: 'stability_exhausted' })
      expect(after.stability.items[0]).toMatchObject({
        verdict: 'exhausted',
        exhausted_reason: 'band_budget',
        exhausted_at: new Date(firstTs + MINUTE + 19 * MINUTE).toISOString(),
      })
      expect(after.stability.items[0].bands[0]).toMatchObject({ consumed_s: 71 * 60, remaining_s: 0 })
      expect(after.stability.legs).toEqual([leg1, leg2.body.id])

      // Exhausted: returned and even released by a person, it may not go out a third time.
      expect((await returnIt(leg2.body.id)).status).toBe(200)
      const decided = await dispose(leg2.body.id, 'release', 'checked')
      expect(decided.status, decided.text).toBe(200)
      const third = await redeliver(rx.rx_id)
      expect(third.status, third.text).toBe(409)
      expect(third.body).toMatchObject({ code: 'stability_exhausted', items: [{ ndc: NDC, reason: 'band_budget' }] })
    })

    it('refuses a leg that is not returned or not released; a machine client cannot release it', async () => {
      const rx = await api.prescription(admin, {
        pharmacy_id: pharmacyId,
        cold_chain: true,
        items: [{ description: 'Insulin', ndc: NDC, quantity: 1 }],
      })
      const queued = await redeliver(rx.rx_id)
      expect(queued.status).toBe(409)
      expect(queued.body).toMatchObject({ code: 'not_released', status_now: 'QUEUED', leg: 1 })
      await ride(rx.delivery_id, [5, 5])
      expect((await returnIt(rx.delivery_id)).status).toBe(200)
      const unreleased = await redeliver(rx.rx_id)
      expect(unreleased.body).toMatchObject({ code: 'not_released', status_now: 'RETURNED' })
      // A machine client (no person behind it) cannot record a disposition at all, so it cannot release one.
      const refused = await http('POST', `/v1/deliveries/${rx.delivery_id}/disposition`, admin, {
        decision: 'release',
        note: 'batch job',
        signature: { meaning: 'released' },
      })
      expect(refused.status, refused.text).toBe(403)
      expect(refused.body.code).toBe('signature_required_person')
      const byMachine = await redeliver(rx.rx_id)
      expect(byMachine.status).toBe(409)
      expect(byMachine.body.code).toBe('not_released')
      // Nothing was created: the prescription still names its only leg.
      expect((await http('GET', `/v1/prescriptions/${rx.rx_id}`, admin)).body.delivery_id).toBe(rx.delivery_id)
    })

    it('does not let a person’s "return" decision go out again, nor another pharmacy redeliver', async () => {
      const rx = await api.prescription(admin, {
        pharmacy_id: pharmacyId,
        cold_chain: true,
        items: [{ description: 'Insulin', ndc: NDC, quantity: 1 }],
      })
      await ride(rx.delivery_id, [5, 5])
      expect((await returnIt(rx.delivery_id)).status).toBe(200)
      expect((await dispose(rx.delivery_id, 'return', 'seal broken')).status).toBe(200)
      expect((await redeliver(rx.rx_id)).body.code).toBe('not_released')
      const other = await api.pharmacy(admin)
      const otherPharmacist = await signedInToken(api, admin, { role: 'pharmacist', pharmacy_id: other.id })
      expect((await redeliver(rx.rx_id, otherPharmacist)).status).toBe(404)
    })

    it('gives budget back by a pharmacist’s assessment, judged live, withdrawable, and never un-breaks', async () => {
      const rx = await api.prescription(admin, {
        pharmacy_id: pharmacyId,
        cold_chain: true,
        items: [{ description: 'Insulin', ndc: NDC, quantity: 1 }],
      })
      const id = rx.delivery_id
      // 50 minutes at 12 °C: 10 minutes of the hour left.
      const { more } = await ride(id, [5, ...Array.from({ length: 51 }, () => 12)])
      expect((await get(id)).stability.items[0].bands[0]).toMatchObject({ consumed_s: 3000, remaining_s: 600 })

      const signature = { meaning: 'assessed', password: pharmacistPassword }
      const body = {
        ndc: '0002-8215-01',
        band: 0,
        add_back_s: 1800,
        justification: 'Manufacturer letter: 30 min more at ≤ 25 °C',
        signature,
      }
      // A machine client cannot assess; bad input names its field; nothing is stored.
      expect((await assess(id, admin, body)).body.code).toBe('signature_required_person')
      const bad = [
        [{ ...body, band: 3 }, '/band'],
        [{ ...body, ndc: '00003-0001-11' }, '/ndc'],
        [{ ...body, add_back_s: -5 }, '/add_back_s'],
        [{ ...body, justification: '  ' }, '/justification'],
      ] as const
      for (const [input, pointer] of bad) {
        const refused = await assess(id, pharmacist, input)
        expect(refused.status, pointer).toBe(422)
        expect(refused.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer)
      }
      expect((await get(id)).stability.items[0].bands[0].add_back_s).toBe(0)

      const made = await assess(id, pharmacist, body, `assess-${store.name}`)
      expect(made.status).toBe(201)
      expect(made.body).toMatchObject({
        delivery_id: id,
        ndc: NDC,
        band: 0,
        add_back_s: 1800,
        withdrawn_at: null,
        signature: { meaning: 'assessed', name: 'A pharmacist', method: 'password' },
        signature_verified: true,
      })
      expect(made.body.assessed_by.sub).toMatch(/^us_/)
      const replay = await assess(id, pharmacist, body, `assess-${store.name}`)
      expect(replay.body.id).toBe(made.body.id)
      expect(replay.headers.get('idempotent-replayed')).toBe('true')
      expect((await get(id)).stability.items[0].bands[0]).toMatchObject({
        add_back_s: 1800,
        consumed_s: 3000,
        remaining_s: 2400,
        assessments: [
          {
            id: made.body.id,
            add_back_s: 1800,
            justification: body.justification,
            signed_by: { name: 'A pharmacist', meaning: 'assessed' },
          },
        ],
      })

      // Live: 30 more minutes at 12 °C (80 in all) would have exhausted the hour; within the hour and a half, no break.
      await more(Array.from({ length: 30 }, () => 12))
      const within = await get(id)
      expect(within.cold_chain.state).not.toBe('BROKEN')
      expect(within.stability.items[0]).toMatchObject({ verdict: 'within' })
      expect(within.stability.items[0].bands[0]).toMatchObject({ consumed_s: 4800, remaining_s: 600 })

      // Withdrawn: the budget is taken back, the ledger is exhausted and the delivery breaks.
      const withdraw = () => http('DELETE', `/v1/deliveries/${id}/assessments/${made.body.id}`, pharmacist, { signature })
      const withdrawn = await withdraw()
      expect(withdrawn.status, withdrawn.text).toBe(200)
      expect(withdrawn.body.withdrawn_at).not.toBeNull()
      expect(withdrawn.body.withdrawal_signature).toMatchObject({ meaning: 'assessed', name: 'A pharmacist' })
      expect((await withdraw()).body.withdrawn_at).toBe(withdrawn.body.withdrawn_at)
      await api.service.monitor.flush()
      const broken = await get(id)
      expect(broken.cold_chain).toMatchObject({ state: 'BROKEN', break_reason: 'stability_exhausted' })
      expect(broken.stability.items[0]).toMatchObject({ verdict: 'exhausted', exhausted_reason: 'band_budget' })
      expect(broken.stability.items[0].bands[0]).toMatchObject({ add_back_s: 0, remaining_s: 0, assessments: [] })

      // Assessed again: the ledger shows the item within budget, but the break stands for a person to dispose.
      expect((await assess(id, pharmacist, { ...body, add_back_s: 3600 })).status).toBe(201)
      // Each assessment and the withdrawal are in the custody chain, each followed by its signature.
      const types = (await get(id)).custody.map((e: { type: string }) => e.type)
      expect(types.slice(-6)).toEqual(['assessed', 'signed', 'assessment_withdrawn', 'signed', 'assessed', 'signed'])
      expect((await http('GET', `/v1/deliveries/${id}/custody/verify`, pharmacist)).body.valid).toBe(true)
      await api.service.monitor.flush()
      const reassessed = await get(id)
      expect(reassessed.stability.items[0]).toMatchObject({ verdict: 'within' })
      expect(reassessed.stability.items[0].bands[0]).toMatchObject({ remaining_s: 2400 })
      expect(reassessed.cold_chain).toMatchObject({ state: 'BROKEN', break_reason: 'stability_exhausted' })
      expect(
        (await http('POST', `/v1/deliveries/${id}/deliver`, admin, { verification: { method: 'otp', evidence: '1' } })).body.code,
      ).toBe('cold_chain_hold')
    })

    it('signs assessments: a wrong password changes nothing, and a signature copied onto another assessment does not verify', async () => {
      const rx = await api.prescription(admin, {
        pharmacy_id: pharmacyId,
        cold_chain: true,
        items: [{ description: 'Insulin', ndc: NDC, quantity: 1 }],
      })
      const id = rx.delivery_id
      await ride(id, [5, ...Array.from({ length: 20 }, () => 12), 5])
      const before = await get(id)
      const body = { ndc: NDC, band: 0, add_back_s: 600, justification: 'Manufacturer letter' }

      const wrong = await assess(id, pharmacist, { ...body, signature: { meaning: 'assessed', password: 'not the password' } })
      expect(wrong.status).toBe(401)
      expect(wrong.body.code).toBe('signature_failed')
      const unchanged = await get(id)
      expect(unchanged.custody).toHaveLength(before.custody.length)
      expect(unchanged.stability.items[0].bands[0].add_back_s).toBe(0)
      // A disposition's meaning does not sign an assessment.
      const meaning = await assess(id, pharmacist, { ...body, signature: { meaning: 'released', password: pharmacistPassword } })
      expect(meaning.status).toBe(422)
      expect(meaning.body.errors[0].pointer).toBe('/signature/meaning')

      const signature = { meaning: 'assessed', password: pharmacistPassword }
      const first = await assess(id, pharmacist, { ...body, signature })
      const second = await assess(id, pharmacist, { ...body, add_back_s: 300, justification: 'QA review', signature })
      expect([first.status, second.status]).toEqual([201, 201])
      expect(second.body.signature.id).not.toBe(first.body.signature.id)
      // The first assessment's signature put on the second's row: it no longer reads as verified.
      await api.service.db
        .updateTable('stability_assessments')
        .set({ signature: JSON.stringify(first.body.signature) })
        .where('id', '=', second.body.id)
        .execute()
      const moved = await http('DELETE', `/v1/deliveries/${id}/assessments/${second.body.id}`, pharmacist, { signature })
      expect(moved.status, moved.text).toBe(200)
      expect(moved.body).toMatchObject({ signature: { id: first.body.signature.id }, signature_verified: false })
      const kept = await http('DELETE', `/v1/deliveries/${id}/assessments/${first.body.id}`, pharmacist, { signature })
      expect(kept.body.signature_verified).toBe(true)
      // A withdrawal without a signature is refused and withdraws nothing.
      const third = await assess(id, pharmacist, { ...body, signature })
      const unsigned = await http('DELETE', `/v1/deliveries/${id}/assessments/${third.body.id}`, pharmacist, {})
      expect(unsigned.status).toBe(422)
      expect((await get(id)).stability.items[0].bands[0].add_back_s).toBe(600)
    })
  })
