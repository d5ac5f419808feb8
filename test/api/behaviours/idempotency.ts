import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HOUR, SECOND, testClock } from '../../helpers/clock.js'
import { ADMIN, type TestApi } from '../../helpers/service.js'
import type { StoreUnderTest } from '../../helpers/stores.js'

/**
 * Holds every prescription creation until released, so a test can send a second request while
 * the first is provably still running.
 */
function holdCreations(api: TestApi) {
  const prescriptions = api.service.services.prescriptions
  const original = prescriptions.create
  let release!: () => void
  let arrived!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  const reached = new Promise<void>((resolve) => (arrived = resolve))
  prescriptions.create = async (...args) => {
    arrived()
    await released
    return original.apply(prescriptions, args)
  }
  return {
    reached,
    release() {
      prescriptions.create = original
      release()
    },
  }
}

/** SPEC §2 idempotency, the same on every entity store. */
export function describeIdempotency(store: StoreUnderTest) {
  describe(`Idempotency-Key on ${store.name}`, () => {
    const clock = testClock()
    let api: TestApi
    let admin: string
    let pharmacyId: string
    let n = 0
    const body = (extra: Record<string, unknown> = {}) => ({
      pharmacy_id: pharmacyId,
      patient_id: `pt_${++n}`,
      cold_chain: false,
      ...extra,
    })
    const create = (token: string, key: string | undefined, payload: unknown) =>
      api.request('POST', '/v1/prescriptions', { token, body: payload, headers: key === undefined ? {} : { 'idempotency-key': key } })
    const prescriptionsWith = async (patientId: string) =>
      (await api.service.db.selectFrom('prescriptions').select('id').where('patient_id', '=', patientId).execute()).length

    beforeAll(async () => {
      api = await store.start({}, { clock })
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
    })
    afterAll(() => api.stop())

    it('replays the stored response byte for byte for the same key and body', async () => {
      const payload = body()
      const first = await create(admin, 'replay-1', payload)
      expect(first.status).toBe(201)
      expect(first.headers.get('idempotent-replayed')).toBeNull()
      clock.advance(SECOND)
      const again = await create(admin, 'replay-1', payload)
      expect(again.status).toBe(201)
      expect(again.text).toBe(first.text)
      expect(again.headers.get('idempotent-replayed')).toBe('true')
      expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'))
      // A replay is still an answer of this API: its own request id, version and rate-limit headers.
      expect(again.headers.get('x-request-id')).toMatch(/^req_/)
      expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'))
      expect(again.headers.get('api-version')).toBe('v1')
      expect(again.headers.get('ratelimit')).toBeTruthy()
      expect(await prescriptionsWith(payload.patient_id as string)).toBe(1)
    })

    it('refuses the same key with a different body (422 idempotency_key_reused)', async () => {
      const first = await create(admin, 'reuse-1', body())
      expect(first.status).toBe(201)
      const other = await create(admin, 'reuse-1', body())
      expect(other.status).toBe(422)
      expect(other.body.code).toBe('idempotency_key_reused')
    })

    it('requires a key on POST /v1/prescriptions, of 1–255 printable ASCII characters', async () => {
      const payload = body()
      const missing = await create(admin, undefined, payload)
      expect(missing.status).toBe(400)
      expect(missing.body.code).toBe('idempotency_key_missing')
      for (const bad of ['x'.repeat(256), 'clé-ünïcode', '']) {
        const res = await create(admin, bad, payload)
        expect(res.status, JSON.stringify(bad)).toBe(422)
        expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/headers/idempotency-key' })])
      }
      expect(await prescriptionsWith(payload.patient_id as string)).toBe(0)
    })

    it('answers 409 idempotency_in_progress while the first request with the key is still running', async () => {
      const payload = body()
      const hold = holdCreations(api)
      const first = create(admin, 'slow-1', payload)
      await hold.reached
      const during = await create(admin, 'slow-1', payload)
      expect(during.status).toBe(409)
      expect(during.body.code).toBe('idempotency_in_progress')
      expect(during.headers.get('retry-after')).toEqual(expect.any(String))
      hold.release()
      expect((await first).status).toBe(201)
      const after = await create(admin, 'slow-1', payload)
      expect(after.headers.get('idempotent-replayed')).toBe('true')
      expect(after.text).toBe((await first).text)
      expect(await prescriptionsWith(payload.patient_id as string)).toBe(1)
    })

    it('keeps keys per client: another client using the same key gets its own prescription', async () => {
      const client = (
        await api.post('/v1/oauth/clients', admin, { client_name: 'second', scope: 'prescriptions:write prescriptions:read' })
      ).body
      const other = await api.tokenFor(client.client_id, client.client_secret)
      const payload = body()
      const mine = await create(admin, 'shared-key', payload)
      const theirs = await create(other, 'shared-key', payload)
      expect([mine.status, theirs.status]).toEqual([201, 201])
      expect(theirs.headers.get('idempotent-replayed')).toBeNull()
      expect(theirs.body.rx_id).not.toBe(mine.body.rx_id)
    })

    it('forgets a key after 24 h', async () => {
      const first = await create(admin, 'day-1', body())
      expect(first.status).toBe(201)
      clock.advance(24 * HOUR - SECOND)
      admin = await api.adminToken() // the access token itself lives 15 min
      expect((await create(admin, 'day-1', body())).body.code).toBe('idempotency_key_reused')
      clock.advance(2 * SECOND)
      admin = await api.adminToken()
      const fresh = await create(admin, 'day-1', body())
      expect(fresh.status).toBe(201)
      expect(fresh.headers.get('idempotent-replayed')).toBeNull()
      expect(fresh.body.rx_id).not.toBe(first.body.rx_id)
    })

    it('does not burn a key on a refused request: the corrected body may use it', async () => {
      const refused = await create(admin, 'fix-1', { ...body(), cold_chain: 'yes' })
      expect(refused.status).toBe(422)
      const corrected = await create(admin, 'fix-1', body())
      expect(corrected.status).toBe(201)
    })

    it('applies the same semantics to delivery actions that send a key', async () => {
      const { fleetId } = await api.fleetWithDriver(admin)
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      const dispatch = (key: string) =>
        api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId }, { 'idempotency-key': key })
      const first = await dispatch('dispatch-1')
      expect(first.status).toBe(200)
      const retry = await dispatch('dispatch-1') // a retry after a lost answer is not a second dispatch
      expect(retry.status).toBe(200)
      expect(retry.headers.get('idempotent-replayed')).toBe('true')
      expect(retry.text).toBe(first.text)
      expect((await dispatch('dispatch-2')).body.code).toBe('invalid_transition') // a new key is a new attempt
    })

    it('answers 409 and writes nothing when another instance claims the key while the request runs', async () => {
      const payload = body()
      const hold = holdCreations(api)
      const pending = create(admin, 'raced-1', payload)
      await hold.reached // this instance looked the key up and found nothing
      // Meanwhile another instance sharing the store takes the key.
      await api.service.db
        .insertInto('idempotency_keys')
        .values({
          client_id: ADMIN.id,
          key: 'raced-1',
          request_hash: 'other',
          state: 'in_progress',
          status: null,
          body: null,
          headers: null,
          created_at: new Date(clock.now()).toISOString(),
          expires_at: new Date(clock.now() + 24 * HOUR).toISOString(),
        })
        .execute()
      hold.release()
      const answer = await pending
      expect(answer.status, answer.text).toBe(409)
      expect(answer.body.code).toBe('idempotency_in_progress')
      expect(await prescriptionsWith(payload.patient_id as string)).toBe(0)
    })

    it('creates exactly one prescription from 50 concurrent requests with the same key', async () => {
      const payload = body()
      const answers = await Promise.all(Array.from({ length: 50 }, () => create(admin, 'storm-1', payload)))
      expect(await prescriptionsWith(payload.patient_id as string)).toBe(1)
      const created = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === null)
      expect(created).toHaveLength(1)
      for (const answer of answers) {
        if (answer.status === 201) expect(answer.text).toBe(created[0]!.text)
        else expect(answer.body.code, answer.text).toBe('idempotency_in_progress')
      }
    })
  })
}
