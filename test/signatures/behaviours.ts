import { createHash } from 'node:crypto'
import { Writable } from 'node:stream'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loggerOptions } from '../../src/logger.js'
import { SECOND, testClock } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'
import type { StoreUnderTest } from '../helpers/stores.js'
import { authorizeUrl, browser, pkce } from '../helpers/browser.js'
import { signedInPerson } from '../helpers/users.js'
import { pinOf } from '../helpers/pins.js'
import { everyStoredRow } from '../helpers/stored-rows.js'

/** Signed dispositions (docs/part11.md), the same on every entity store. */
export function describeSignedDispositions(store: StoreUnderTest) {
  describe(`signed dispositions on ${store.name}`, () => {
    const clock = testClock(Date.parse('2031-03-04T09:00:00.000Z'))
    const lines: string[] = []
    let api: TestApi
    let pharmacyId: string
    let fleet: Awaited<ReturnType<TestApi['fleetWithDriver']>>
    let pharmacist: Awaited<ReturnType<typeof signedInPerson>>

    beforeAll(async () => {
      const sink = new Writable({ write: (chunk, _enc, done) => void (lines.push(String(chunk)), done()) })
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10', LOG_LEVEL: 'trace' }, { clock, logger: pino(loggerOptions('trace'), sink) })
      const admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
      fleet = await api.fleetWithDriver(admin)
      pharmacist = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: pharmacyId })
    })
    afterAll(async () => {
      await api.stop()
      await store.cleanup()
    })

    /** A delivery picked up whose cold chain the rule engine has declared BROKEN. */
    async function brokenDelivery(): Promise<string> {
      const admin = await api.adminToken()
      const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId, cold_chain: true })
      for (const [action, body] of [
        ['dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId, tote_id: tote.id }],
        ['pickup', { from: pharmacyId, to: fleet.driverId, signature: 's' }],
      ] as const)
        expect((await api.post(`/v1/deliveries/${rx.delivery_id}/${action}`, admin, body)).status).toBe(200)
      const row = await api.service.db
        .selectFrom('deliveries')
        .select('cold_chain')
        .where('id', '=', rx.delivery_id)
        .executeTakeFirstOrThrow()
      await api.service.db
        .updateTable('deliveries')
        .set({ cold_chain: JSON.stringify({ ...JSON.parse(row.cold_chain!), state: 'BROKEN', break_reason: 'hard_limit' }) })
        .where('id', '=', rx.delivery_id)
        .execute()
      return rx.delivery_id
    }
    const decide = (id: string, token: string, body: unknown, headers?: Record<string, string>) =>
      api.post(`/v1/deliveries/${id}/disposition`, token, body, headers)
    const delivery = async (id: string) => (await api.get(`/v1/deliveries/${id}`, await api.adminToken())).body
    const WRONG = 'not-the-password-SENTINEL-91c2'

    it('records a disposition signed with the password: name, time, meaning in the answer, its own event in the chain', async () => {
      const id = await brokenDelivery()
      const res = await decide(
        id,
        pharmacist.token,
        { decision: 'return', note: 'Frozen insulin', signature: { meaning: 'returned', password: pharmacist.password } },
        { 'idempotency-key': 'sign-1' },
      )
      expect(res.status, res.text).toBe(200)
      const signature = res.body.cold_chain.disposition.signature
      expect(signature).toEqual({
        id: expect.stringMatching(/^sg_/),
        signer: pharmacist.user.id,
        name: 'A pharmacist',
        email: pharmacist.email,
        meaning: 'returned',
        signed_at: new Date(clock.now()).toISOString(),
        record_hash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
        method: 'password',
      })
      expect(res.body.custody.map((e: { type: string }) => e.type)).toEqual(['created', 'dispatched', 'picked_up', 'disposition', 'signed'])
      expect(res.body.custody.at(-1)).toMatchObject({ signature, evidence_hash: signature.record_hash })
      expect((await api.get(`/v1/deliveries/${id}/custody/verify`, pharmacist.token)).body).toMatchObject({ valid: true, length: 5 })
      // Listed once every transaction that could place an event before it has ended (docs/api.md, Events): polled.
      const admin = await api.adminToken()
      await expect
        .poll(async () => {
          const events = (await api.get(`/v1/events?delivery_id=${id}`, admin)).body.data
          return events.find((e: { type: string }) => e.type === 'cold-chain.disposition')?.data.signature
        })
        .toEqual(signature)
      // The same request again under its key: the stored answer, nothing signed twice.
      const again = await decide(
        id,
        pharmacist.token,
        { decision: 'return', note: 'Frozen insulin', signature: { meaning: 'returned', password: pharmacist.password } },
        { 'idempotency-key': 'sign-1' },
      )
      expect(again.headers.get('idempotent-replayed')).toBe('true')
      expect((await delivery(id)).custody).toHaveLength(5)
      // The key's record keeps no hash of the body as sent: that would let a reader of the table test password guesses offline.
      const sent = JSON.stringify({
        decision: 'return',
        note: 'Frozen insulin',
        signature: { meaning: 'returned', password: pharmacist.password },
      })
      const bodyHash = createHash('sha256').update(`POST /v1/deliveries/${id}/disposition\n${sent}`).digest('hex')
      expect(await everyStoredRow(api, store.name)).not.toContain(bodyHash)
    })

    it('refuses a wrong password with 401 signature_failed and changes nothing; repeated failures are throttled', async () => {
      const guesser = await signedInPerson(api, await api.adminToken(), { role: 'pharmacist', pharmacy_id: pharmacyId })
      const id = await brokenDelivery()
      const before = await delivery(id)
      const wrong = await decide(id, guesser.token, {
        decision: 'release',
        note: 'ok',
        signature: { meaning: 'released', password: WRONG },
      })
      expect(wrong.status).toBe(401)
      expect(wrong.body.code).toBe('signature_failed')
      expect(await delivery(id)).toEqual(before)
      for (let i = 0; i < 4; i++)
        await decide(id, guesser.token, { decision: 'release', note: 'ok', signature: { meaning: 'released', password: WRONG } })
      // Even the right password waits now: guessing is slowed as at sign-in (the same counter).
      const throttled = await decide(id, guesser.token, {
        decision: 'release',
        note: 'ok',
        signature: { meaning: 'released', password: guesser.password },
      })
      expect(throttled.status).toBe(429)
      expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThan(0)
      expect((await delivery(id)).cold_chain.disposition).toBeNull()
      // So is signing in on the sign-in page, for the same account, with the right password.
      const elsewhere = browser(api.service, '198.51.100.9')
      const form = await elsewhere.get(
        authorizeUrl({ client_id: guesser.clientId, redirect_uri: 'https://app.example/callback', code_challenge: pkce().challenge }),
      )
      const signIn = await elsewhere.post('/oauth/authorize', { ...form.form, email: guesser.email, password: guesser.password })
      expect(signIn.status).toBe(429)
    })

    it('a delivery PIN is in no stored row, no log line and no answer to the driver; wrong and right tries alike', async () => {
      const admin = await api.adminToken()
      const guarded = (await api.pharmacy(admin, { name: 'PIN pharmacy', pod_requirements: { pin: true } })).id
      const rx = await api.prescription(admin, { pharmacy_id: guarded })
      const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
        fleet_id: fleet.fleetId,
        driver_id: fleet.driverId,
      })
      const picked = await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: guarded, to: fleet.driverId, signature: 's' })
      const pin = (await pinOf(api, rx.delivery_id))!
      expect(pin).toMatch(/^\d{6}$/)
      const wrongPin = pin === '999999' ? '888888' : '999999'
      const tries = []
      for (const sent of [wrongPin, pin])
        tries.push(
          await api.post(
            `/v1/deliveries/${rx.delivery_id}/deliver`,
            admin,
            { verification: { method: 'otp', evidence: 'told at the door' }, proof: { pin: sent } },
            { 'idempotency-key': `pin-${sent}` },
          ),
        )
      expect(tries.map((t) => t.status)).toEqual([422, 200])
      const answers = [dispatched, picked, ...tries].map((r) => r.text).join('\n')
      const rows = await everyStoredRow(api, store.name)
      const logged = lines.join('\n')
      // As a value anywhere (JSON text, a log field): a six-digit run inside a hash or an id is no leak.
      for (const secret of [pin, wrongPin])
        for (const form of [`"${secret}"`, `=${secret}`, `:${secret}`]) {
          expect(rows).not.toContain(form)
          expect(logged).not.toContain(form)
          expect(answers).not.toContain(form)
        }
      expect(lines.some((l) => l.includes('/deliver'))).toBe(true) // the requests were logged, without their bodies
    })

    it('the password is in no stored row, no log line and no answer', async () => {
      const rows = await everyStoredRow(api, store.name)
      for (const secret of [pharmacist.password, WRONG]) {
        expect(rows).not.toContain(secret)
        expect(lines.join('\n')).not.toContain(secret)
      }
      expect(lines.join('\n')).not.toMatch(/SENTINEL/)
      expect(lines.some((l) => l.includes('/disposition'))).toBe(true) // the requests were logged, without their bodies
    })

    it('asks for a signature: a body without one is 422, a wrong meaning is 422, a machine client is 403', async () => {
      const id = await brokenDelivery()
      const missing = await decide(id, pharmacist.token, { decision: 'release', note: 'ok' })
      expect(missing.status).toBe(422)
      expect(missing.body.errors).toEqual([expect.objectContaining({ pointer: '/signature' })])
      const meaning = await decide(id, pharmacist.token, {
        decision: 'release',
        note: 'ok',
        signature: { meaning: 'returned', password: pharmacist.password },
      })
      expect(meaning.status).toBe(422)
      expect(meaning.body.errors).toEqual([expect.objectContaining({ pointer: '/signature/meaning' })])
      const machine = await decide(id, await api.adminToken(), {
        decision: 'release',
        note: 'ok',
        signature: { meaning: 'released', password: 'whatever it is' },
      })
      expect(machine.status).toBe(403)
      expect(machine.body.code).toBe('signature_required_person')
      expect((await delivery(id)).cold_chain.disposition).toBeNull()
    })

    it('signs without a password within 300 s of signing in; later it answers the RFC 9470 challenge, which a refresh does not meet', async () => {
      const admin = await api.adminToken()
      const fresh = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: pharmacyId })
      const first = await brokenDelivery()
      const recent = await decide(first, fresh.token, { decision: 'release', note: 'ok', signature: { meaning: 'released' } })
      expect(recent.status, recent.text).toBe(200)
      expect(recent.body.cold_chain.disposition.signature).toMatchObject({ method: 'recent_sign_in', signer: fresh.user.id })

      clock.advance(301 * SECOND)
      const second = await brokenDelivery()
      const stale = await decide(second, fresh.token, { decision: 'release', note: 'ok', signature: { meaning: 'released' } })
      expect(stale.status).toBe(401)
      expect(stale.body.code).toBe('insufficient_user_authentication')
      expect(stale.headers.get('www-authenticate')).toBe('Bearer error="insufficient_user_authentication", max_age=300')

      const refreshed = await api.service.app.request('/oauth/token', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'refresh_token',
          refresh_token: fresh.refreshToken!,
          client_id: fresh.clientId,
        }).toString(),
      })
      const { access_token } = (await refreshed.json()) as { access_token: string }
      expect(refreshed.status).toBe(200)
      const after = await decide(second, access_token, { decision: 'release', note: 'ok', signature: { meaning: 'released' } })
      expect(after.status).toBe(401)
      expect(after.body.code).toBe('insufficient_user_authentication')
      // With the password it signs.
      const withPassword = await decide(second, access_token, {
        decision: 'release',
        note: 'ok',
        signature: { meaning: 'released', password: fresh.password },
      })
      expect(withPassword.status).toBe(200)
    })

    it('a disabled user cannot sign', async () => {
      const admin = await api.adminToken()
      const leaving = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: pharmacyId })
      expect((await api.request('PATCH', `/v1/users/${leaving.user.id}`, { token: admin, body: { disabled: true } })).status).toBe(200)
      const id = await brokenDelivery()
      const res = await decide(id, leaving.token, {
        decision: 'release',
        note: 'ok',
        signature: { meaning: 'released', password: leaving.password },
      })
      expect(res.status).toBe(401)
      expect((await delivery(id)).cold_chain.disposition).toBeNull()
    })

    it('a signature copied onto another record does not verify', async () => {
      const signedId = await brokenDelivery()
      const signed = await decide(signedId, pharmacist.token, {
        decision: 'return',
        note: 'too warm',
        signature: { meaning: 'returned', password: pharmacist.password },
      })
      expect(signed.status).toBe(200)
      const otherId = await brokenDelivery()
      // Another delivery's disposition, recorded unsigned, then the first one's signature appended as if it signed it,
      // every chain link recomputed so that only the binding can give it away.
      const { chainEvent } = await import('../../src/domain/custody.js')
      const { custodyRow } = await import('../../src/store/custody-rows.js')
      const chain = (await delivery(otherId)).custody
      const { hash: headHash, prev_hash: _p, ...head } = chain.at(-1)
      const disposition = chainEvent(headHash, {
        ...head,
        seq: head.seq + 1,
        type: 'disposition',
        from: null,
        to: null,
        evidence_hash: null,
      })
      const { hash: _h, prev_hash: _q, ...copied } = signed.body.custody.at(-1)
      const forged = chainEvent(disposition.hash, { ...copied, seq: disposition.seq + 1 })
      await api.service.db
        .insertInto('custody_events')
        .values([custodyRow(otherId, disposition), custodyRow(otherId, forged)])
        .execute()
      const verdict = (await api.get(`/v1/deliveries/${otherId}/custody/verify`, pharmacist.token)).body
      expect(verdict).toMatchObject({ valid: false, first_bad_seq: forged.seq, reason: expect.stringContaining('record_hash') })
      expect((await api.get(`/v1/deliveries/${signedId}/custody/verify`, pharmacist.token)).body.valid).toBe(true)
    })
  })
}
