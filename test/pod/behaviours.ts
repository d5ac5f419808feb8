import { createHash } from 'node:crypto'
import { request as httpRequest } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pinOf } from '../helpers/pins.js'
import { everyStoredRow } from '../helpers/stored-rows.js'
import type { TestApi } from '../helpers/service.js'
import type { StoreUnderTest } from '../helpers/stores.js'
import { signedInToken } from '../helpers/users.js'
import { GPS_MARK, jpegWithGps, JPEG_PICTURE, pngWithGps } from './images.js'

const MiB = 1024 * 1024
const ALL_REQUIRED = { photo: true, signature: true, pin: true, barcode: true, id_check: { minimum_age: 18 } }
// An NDC on the label; its GTIN-14 (GS1 US: 0 + 03 + the ten digits + check digit) is what a scanner reads.
const NDC = '0002-8215-01'
const GTIN_OF_NDC = '00300028215012'

type Reply = { status: number; headers: Headers; body: any; bytes: Buffer }

/** Proof of delivery over real HTTP (docs/api.md, Proof of delivery), the same on every entity store. */
export function describeProofOfDelivery(store: StoreUnderTest) {
  describe(`proof of delivery on ${store.name}`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let pharmacyId: string
    let pharmacyToken: string
    let otherPharmacyToken: string
    let fleet: { fleetId: string; driverId: string; driver2Id: string }
    let driver: string
    let otherFleetToken: string

    async function call(method: string, path: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
      const isBytes = Buffer.isBuffer(body)
      const res = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined && !isBytes ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: isBytes ? new Uint8Array(body) : JSON.stringify(body) } : {}),
      })
      const bytes = Buffer.from(await res.arrayBuffer())
      let parsed: unknown = null
      try {
        parsed = JSON.parse(bytes.toString('utf8'))
      } catch {
        /* an image */
      }
      return { status: res.status, headers: res.headers, body: parsed, bytes }
    }
    const upload = (deliveryId: string, bytes: Buffer, type: string, token = driver) =>
      call('POST', `/v1/deliveries/${deliveryId}/attachments`, token, bytes, { 'content-type': type })
    const download = (deliveryId: string, attachmentId: string, token: string) =>
      call('GET', `/v1/deliveries/${deliveryId}/attachments/${attachmentId}`, token)

    async function clientToken(scope: string, tenant: Record<string, string>) {
      const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
      expect(res.status, res.text).toBe(201)
      return api.tokenFor(res.body.client_id, res.body.client_secret)
    }

    /** A delivery of the pharmacy, dispatched to the driver and picked up. */
    async function pickedUp(extra: Record<string, unknown> = {}) {
      const rx = await api.prescription(pharmacyToken, { items: [{ description: 'Insulin', ndc: NDC, quantity: 1 }], ...extra })
      for (const [action, body] of [
        ['dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId }],
        ['pickup', { from: pharmacyId, to: fleet.driverId, signature: 's' }],
      ] as const) {
        const res = await api.post(`/v1/deliveries/${rx.delivery_id}/${action}`, admin, body)
        expect(res.status, res.text).toBe(200)
      }
      return rx
    }

    beforeAll(async () => {
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' })
      base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin, { pod_requirements: ALL_REQUIRED })).id
      const otherPharmacy = (await api.pharmacy(admin, { name: 'Elsewhere' })).id
      fleet = await api.fleetWithDriver(admin)
      const otherFleet = await api.fleetWithDriver(admin)
      const pharmacyScopes =
        'prescriptions:read prescriptions:write deliveries:read deliveries:write custody:write pharmacies:read pharmacies:write'
      pharmacyToken = await clientToken(pharmacyScopes, { pharmacy_id: pharmacyId })
      otherPharmacyToken = await clientToken(pharmacyScopes, { pharmacy_id: otherPharmacy })
      otherFleetToken = await clientToken('deliveries:read custody:write', { fleet_id: otherFleet.fleetId })
      driver = await signedInToken(api, admin, { role: 'driver', fleet_id: fleet.fleetId, driver_id: fleet.driverId })
    })
    afterAll(async () => {
      await api.stop()
      await store.cleanup()
    })

    it('keeps pod_requirements on the pharmacy (create, PATCH) and the prescription, and fixes their union at dispatch', async () => {
      expect((await api.get(`/v1/pharmacies/${pharmacyId}`, admin)).body.pod_requirements).toEqual(ALL_REQUIRED)
      const other = await api.pharmacy(admin, { name: 'Photo only', pod_requirements: { photo: true, pin: false } })
      expect((await api.get(`/v1/pharmacies/${other.id}`, admin)).body.pod_requirements).toEqual({ photo: true })
      const patched = await api.request('PATCH', `/v1/pharmacies/${other.id}`, {
        token: admin,
        body: { pod_requirements: { photo: true, id_check: { minimum_age: 18 } } },
      })
      expect(patched.status, patched.text).toBe(200)
      expect(patched.body.pod_requirements).toEqual({ photo: true, id_check: { minimum_age: 18 } })
      // A controlled substance: the prescription adds a signature and an older minimum age.
      const rx = await api.prescription(admin, {
        pharmacy_id: other.id,
        pod_requirements: { signature: true, id_check: { minimum_age: 21, document_types: ['passport'] } },
      })
      expect(rx.pod_requirements).toEqual({ signature: true, id_check: { minimum_age: 21, document_types: ['passport'] } })
      expect((await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body.pod_requirements).toBeNull()
      const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleet.fleetId })
      expect(dispatched.body.pod_requirements).toEqual({
        photo: true,
        signature: true,
        id_check: { minimum_age: 21, document_types: ['passport'] },
      })
      // No PIN was required, so none was issued.
      expect(await pinOf(api, rx.delivery_id)).toBeNull()
      const cleared = await api.request('PATCH', `/v1/pharmacies/${other.id}`, { token: admin, body: { pod_requirements: null } })
      expect(cleared.body.pod_requirements).toBeNull()
      const bad = await api.post(`/v1/pharmacies`, admin, {
        name: 'x',
        address: { line1: '1', city: 'c', region: 'r', postal_code: '1', country: 'US' },
        timezone: 'UTC',
        pod_requirements: { selfie: true },
      })
      expect(bad.status).toBe(422)
      expect(bad.body.errors).toEqual([expect.objectContaining({ pointer: '/pod_requirements/selfie' })])
    })

    it('stores a JPEG without its Exif GPS, XMP and comment, content-addressed, served as a download with nosniff', async () => {
      const rx = await pickedUp()
      const sent = jpegWithGps()
      expect(sent.includes(GPS_MARK)).toBe(true)
      const res = await upload(rx.delivery_id, sent, 'image/jpeg')
      expect(res.status, res.bytes.toString()).toBe(201)
      expect(res.body).toEqual({
        id: expect.stringMatching(/^at_/),
        sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
        content_type: 'image/jpeg',
        size: expect.any(Number),
        created_at: expect.any(String),
      })
      expect(res.body.size).toBeLessThan(sent.length)
      const got = await download(rx.delivery_id, res.body.id, pharmacyToken)
      expect(got.status).toBe(200)
      expect(got.headers.get('content-type')).toBe('image/jpeg')
      expect(got.headers.get('content-disposition')).toMatch(/^attachment; filename="at_[0-9a-z]+\.jpg"$/)
      expect(got.headers.get('x-content-type-options')).toBe('nosniff')
      // The stored bytes: no GPS, no Exif, no XMP, no comment; the picture whole; hashed as stored.
      expect(got.bytes.includes(GPS_MARK)).toBe(false)
      expect(got.bytes.includes(Buffer.from('Exif\0\0'))).toBe(false)
      expect(got.bytes.includes(Buffer.from('GPSLatitude'))).toBe(false)
      expect(got.bytes.includes(Buffer.from('41.875'))).toBe(false)
      expect(got.bytes.includes(JPEG_PICTURE)).toBe(true)
      expect(got.bytes.subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]))
      expect(got.bytes.subarray(-2)).toEqual(Buffer.from([0xff, 0xd9]))
      expect(createHash('sha256').update(got.bytes).digest('hex')).toBe(res.body.sha256)
      // The same image again: the same attachment, nothing stored twice.
      const again = await upload(rx.delivery_id, sent, 'image/jpeg')
      expect(again.status).toBe(200)
      expect(again.body.id).toBe(res.body.id)
      const blobs = await api.service.db.selectFrom('attachment_blobs').select('sha256').where('sha256', '=', res.body.sha256).execute()
      expect(blobs).toHaveLength(1)
    })

    it('stores a PNG without its eXIf, text and time chunks; a large one (≈ 4.9 MiB) comes back byte for byte', async () => {
      const rx = await pickedUp()
      const res = await upload(rx.delivery_id, pngWithGps(), 'image/png')
      expect(res.status).toBe(201)
      const got = await download(rx.delivery_id, res.body.id, driver)
      expect(got.bytes.equals(pngWithGps(true))).toBe(true)
      expect(got.bytes.includes(GPS_MARK)).toBe(false)
      // Stored in chunks across rows: an image near the limit reads back whole.
      const big = Buffer.concat([jpegWithGps().subarray(0, -2), Buffer.alloc(Math.floor(4.9 * MiB), 0x11), Buffer.from([0xff, 0xd9])])
      const stored = await upload(rx.delivery_id, big, 'image/jpeg')
      expect(stored.status, stored.bytes.toString().slice(0, 300)).toBe(201)
      const back = await download(rx.delivery_id, stored.body.id, driver)
      expect(back.bytes.length).toBe(stored.body.size)
      expect(createHash('sha256').update(back.bytes).digest('hex')).toBe(stored.body.sha256)
    })

    it('reads the type from the bytes: a PNG sent as JPEG is 422, text or a GIF sent as an image 415, another declared type 415', async () => {
      const rx = await pickedUp()
      const mismatch = await upload(rx.delivery_id, pngWithGps(), 'image/jpeg')
      expect(mismatch.status).toBe(422)
      expect(mismatch.body).toMatchObject({
        code: 'content_type_mismatch',
        content_type_sent: 'image/jpeg',
        content_type_found: 'image/png',
      })
      const html = await upload(rx.delivery_id, Buffer.from('<html><script>alert(1)</script></html>'), 'image/png')
      expect(html.status).toBe(415)
      expect(html.body.code).toBe('unsupported_media_type')
      const gif = await upload(rx.delivery_id, Buffer.from('GIF89a\x01\x00\x01\x00', 'latin1'), 'image/jpeg')
      expect(gif.status).toBe(415)
      const declared = await upload(rx.delivery_id, jpegWithGps(), 'image/gif')
      expect(declared.status).toBe(415)
      expect(declared.body.detail).toMatch(/image\/jpeg or image\/png/)
      const truncated = await upload(rx.delivery_id, jpegWithGps().subarray(0, 40), 'image/jpeg')
      expect(truncated.status).toBe(415)
      expect(truncated.body.detail).toMatch(/truncated JPEG/)
      const stored = await api.service.db.selectFrom('attachments').select('id').where('delivery_id', '=', rx.delivery_id).execute()
      expect(stored).toEqual([])
    })

    it('refuses over 5 MiB before reading it: a declared length at once, a chunked or lying body cut off at the limit', async () => {
      const rx = await pickedUp()
      const path = `/v1/deliveries/${rx.delivery_id}/attachments`
      // Declared 6 MiB and nothing sent: answered 413 without waiting for a byte of the body.
      const declared = await rawUpload(base, path, driver, { 'content-length': String(6 * MiB) }, 0)
      expect(declared.status).toBe(413)
      expect(declared.sent).toBe(0)
      // No length (chunked): cut off once past 5 MiB, answered long before the client had sent its 64 MiB.
      const chunked = await rawUpload(base, path, driver, { 'transfer-encoding': 'chunked' }, 64 * MiB)
      expect(chunked.status).toBe(413)
      expect(JSON.parse(chunked.body)).toMatchObject({ code: 'payload_too_large' })
      expect(chunked.sent).toBeLessThan(64 * MiB)
      // Exactly at the limit with a true length is read (and judged by its bytes).
      const atLimit = await upload(
        rx.delivery_id,
        Buffer.concat([jpegWithGps().subarray(0, -2), Buffer.alloc(5 * MiB - jpegWithGps().length, 0x22), Buffer.from([0xff, 0xd9])]),
        'image/jpeg',
      )
      expect(atLimit.status).toBe(201)
    })

    it('stores each of several concurrent uploads with its own bytes (the service reuses its read buffers)', async () => {
      const rx = await pickedUp()
      const fills = [0x31, 0x42, 0x53, 0x64, 0x75, 0x86]
      // ~600 KiB each: more than one stored chunk, and more than the two the service reads at once.
      const images = fills.map((fill) =>
        Buffer.concat([jpegWithGps().subarray(0, -2), Buffer.alloc(600 * 1024, fill), Buffer.from([0xff, 0xd9])]),
      )
      const answers = await Promise.all(images.map((image) => upload(rx.delivery_id, image, 'image/jpeg')))
      for (const [i, answer] of answers.entries()) {
        expect(answer.status).toBe(201)
        const got = await download(rx.delivery_id, answer.body.id, driver)
        expect(got.bytes.length).toBe(answer.body.size)
        expect(createHash('sha256').update(got.bytes).digest('hex')).toBe(answer.body.sha256)
        // Its own scan bytes, whole, and none of another image's.
        expect(got.bytes.includes(Buffer.alloc(600 * 1024, fills[i]!))).toBe(true)
        for (const other of fills.filter((f) => f !== fills[i])) expect(got.bytes.includes(Buffer.alloc(64, other))).toBe(false)
      }
    })

    it('walls: the driver and fleet upload, the pharmacy reads; another tenant sees nothing, another fleet cannot upload', async () => {
      const rx = await pickedUp()
      const mine = await upload(rx.delivery_id, pngWithGps(true), 'image/png')
      expect(mine.status).toBe(201)
      expect((await download(rx.delivery_id, mine.body.id, pharmacyToken)).status).toBe(200)
      expect((await download(rx.delivery_id, mine.body.id, otherPharmacyToken)).status).toBe(404)
      expect((await download(rx.delivery_id, mine.body.id, otherFleetToken)).status).toBe(404)
      expect((await upload(rx.delivery_id, pngWithGps(true), 'image/png', otherFleetToken)).status).toBe(404)
      expect((await upload(rx.delivery_id, pngWithGps(true), 'image/png', otherPharmacyToken)).status).toBe(404)
      const byPharmacy = await upload(rx.delivery_id, pngWithGps(true), 'image/png', pharmacyToken)
      expect(byPharmacy.status).toBe(403)
      // An attachment id of another delivery is not found under this one.
      const other = await pickedUp()
      expect((await download(other.delivery_id, mine.body.id, pharmacyToken)).status).toBe(404)
      // A driver of the same fleet not assigned to the delivery sees nothing either.
      const second = await signedInToken(api, admin, { role: 'driver', fleet_id: fleet.fleetId, driver_id: fleet.driver2Id })
      expect((await download(rx.delivery_id, mine.body.id, second)).status).toBe(404)
      expect((await upload(rx.delivery_id, pngWithGps(true), 'image/png', second)).status).toBe(404)
    })

    it('deliver without the required proofs is 422 pod_requirements_unmet listing each one; wrong ones are named too', async () => {
      const rx = await pickedUp()
      const verification = { method: 'otp', evidence: 'x' }
      const none = await call('POST', `/v1/deliveries/${rx.delivery_id}/deliver`, driver, { verification })
      expect(none.status).toBe(422)
      expect(none.body.code).toBe('pod_requirements_unmet')
      expect(none.body.missing).toEqual(['signature', 'photo', 'pin', 'id_check', 'barcode'])
      expect(none.body.unmet.map((u: { pointer: string }) => u.pointer)).toEqual([
        '/proof/signature',
        '/proof/photo',
        '/proof/pin',
        '/proof/id_check',
        '/proof/barcode',
      ])
      const elsewhere = await pickedUp()
      const foreign = await upload(elsewhere.delivery_id, pngWithGps(true), 'image/png')
      const wrong = await call('POST', `/v1/deliveries/${rx.delivery_id}/deliver`, driver, {
        verification,
        proof: {
          photo: foreign.body.id,
          pin: '000000',
          signature: { attachment: 'at_01jd0000000000000000000000', signer_name: 'Pat Doe', relationship: 'spouse' },
          id_check: { document_type: 'drivers_license', minimum_age: 16, birth_date_verified: true },
          barcode: '00012345678905',
        },
      })
      expect(wrong.status).toBe(422)
      expect(wrong.body.unmet).toEqual([
        expect.objectContaining({ proof: 'id_check', pointer: '/proof/id_check/minimum_age' }),
        expect.objectContaining({ proof: 'barcode', pointer: '/proof/barcode' }),
        expect.objectContaining({ proof: 'photo', pointer: '/proof/photo' }),
        expect.objectContaining({ proof: 'signature', pointer: '/proof/signature/attachment' }),
      ])
      // The PIN was not compared while other proofs failed: no try spent.
      const pins = await api.service.db
        .selectFrom('delivery_pins')
        .select('wrong_tries')
        .where('delivery_id', '=', rx.delivery_id)
        .executeTakeFirstOrThrow()
      expect(pins.wrong_tries).toBe(0)
      expect((await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body.status).toBe('PICKED_UP')
    })

    /** Uploads a photo and a signature for the delivery and answers a full, right proof (but the PIN). */
    async function proofFor(deliveryId: string, barcode: string) {
      const photo = await upload(deliveryId, jpegWithGps(), 'image/jpeg')
      const signature = await upload(deliveryId, pngWithGps(), 'image/png')
      return {
        photo: photo.body,
        signature: signature.body,
        proof: {
          photo: photo.body.id,
          signature: { attachment: signature.body.id, signer_name: 'Pat Doe', relationship: 'spouse' },
          id_check: { document_type: 'drivers_license', minimum_age: 21, birth_date_verified: true },
          barcode,
        },
      }
    }

    it('delivers with every proof: each image’s sha256 and the other proofs enter the custody event’s hash, never the PIN', async () => {
      const rx = await pickedUp()
      const { photo, signature, proof } = await proofFor(rx.delivery_id, GTIN_OF_NDC)
      const pin = await pinOf(api, rx.delivery_id)
      expect(pin).toMatch(/^\d{6}$/)
      // The driver's view of the delivery never carries it.
      expect(JSON.stringify((await call('GET', `/v1/deliveries/${rx.delivery_id}`, driver)).body)).not.toContain(`"${pin}"`)
      const done = await call('POST', `/v1/deliveries/${rx.delivery_id}/deliver`, driver, {
        verification: { method: 'otp', evidence: 'ok' },
        proof: { ...proof, pin },
      })
      expect(done.status, JSON.stringify(done.body)).toBe(200)
      const event = done.body.custody.at(-1)
      expect(event.type).toBe('delivered')
      expect(event.evidence).toEqual({
        photo: { attachment: photo.id, sha256: photo.sha256 },
        signature: { attachment: signature.id, sha256: signature.sha256, signer_name: 'Pat Doe', relationship: 'spouse' },
        id_check: { document_type: 'drivers_license', minimum_age: 21, birth_date_verified: true },
        barcode: GTIN_OF_NDC,
        pin: 'verified',
      })
      expect(JSON.stringify(done.body)).not.toContain(`"${pin}"`)
      const verify = await call('GET', `/v1/deliveries/${rx.delivery_id}/custody/verify`, pharmacyToken)
      expect(verify.body).toMatchObject({ valid: true })
      // The evidence is inside the hash: another image's sha256 written into the row breaks the chain there.
      const row = await api.service.db
        .selectFrom('custody_events')
        .select(['seq', 'evidence'])
        .where('delivery_id', '=', rx.delivery_id)
        .where('type', '=', 'delivered')
        .executeTakeFirstOrThrow()
      const forged = JSON.parse(row.evidence!)
      forged.photo.sha256 = 'f'.repeat(64)
      await api.service.db
        .updateTable('custody_events')
        .set({ evidence: JSON.stringify(forged) })
        .where('delivery_id', '=', rx.delivery_id)
        .where('seq', '=', row.seq)
        .execute()
      const broken = await call('GET', `/v1/deliveries/${rx.delivery_id}/custody/verify`, pharmacyToken)
      expect(broken.body).toMatchObject({ valid: false, first_bad_seq: row.seq })
      // The PIN is no longer shown once the delivery has ended; the images stay with the delivery record.
      expect(await pinOf(api, rx.delivery_id)).toBeNull()
      expect((await download(rx.delivery_id, photo.id, pharmacyToken)).status).toBe(200)
      // A delivery without requirements delivers as before, its chain as before (no evidence member).
      const plain = await api.prescription(admin, { pharmacy_id: (await api.pharmacy(admin, { name: 'No proofs' })).id })
      for (const [action, body] of [
        ['dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId }],
        ['pickup', { from: plain.pharmacy_id, to: fleet.driverId, signature: 's' }],
        ['deliver', { verification: { method: 'otp', evidence: 'ok' } }],
      ] as const)
        expect((await api.post(`/v1/deliveries/${plain.delivery_id}/${action}`, admin, body)).status).toBe(200)
      const plainChain = (await api.get(`/v1/deliveries/${plain.delivery_id}`, admin)).body.custody
      expect(plainChain.at(-1)).not.toHaveProperty('evidence')
      expect((await api.get(`/v1/deliveries/${plain.delivery_id}/custody/verify`, admin)).body.valid).toBe(true)
    })

    it('accepts the rx_id or a GS1 (01) element string as the barcode', async () => {
      const rx = await pickedUp()
      const { proof } = await proofFor(rx.delivery_id, `(01)${GTIN_OF_NDC}(21)SERIAL1`)
      const pin = await pinOf(api, rx.delivery_id)
      const done = await call('POST', `/v1/deliveries/${rx.delivery_id}/deliver`, driver, {
        verification: { method: 'otp', evidence: 'ok' },
        proof: { ...proof, pin },
      })
      expect(done.status, JSON.stringify(done.body)).toBe(200)
      const byRx = await pickedUp()
      const second = await proofFor(byRx.delivery_id, byRx.rx_id)
      const ok = await call('POST', `/v1/deliveries/${byRx.delivery_id}/deliver`, driver, {
        verification: { method: 'otp', evidence: 'ok' },
        proof: { ...second.proof, pin: await pinOf(api, byRx.delivery_id) },
      })
      expect(ok.status).toBe(200)
    })

    it('counts wrong PINs: 4 left, …, the fifth locks the delivery (409 pin_locked, even with the right PIN); the driver can still return it', async () => {
      const rx = await pickedUp()
      const { proof } = await proofFor(rx.delivery_id, rx.rx_id)
      const pin = (await pinOf(api, rx.delivery_id))!
      const wrongPin = pin === '000000' ? '111111' : '000000'
      const deliver = (p: string) =>
        call(
          'POST',
          `/v1/deliveries/${rx.delivery_id}/deliver`,
          driver,
          { verification: { method: 'otp', evidence: 'ok' }, proof: { ...proof, pin: p } },
          { 'idempotency-key': `pin-${Math.random()}` },
        )
      for (const left of [4, 3, 2, 1]) {
        const wrong = await deliver(wrongPin)
        expect(wrong.status).toBe(422)
        expect(wrong.body).toMatchObject({ code: 'pod_requirements_unmet', missing: ['pin'], pin_tries_left: left })
      }
      const fifth = await deliver(wrongPin)
      expect(fifth.status).toBe(409)
      expect(fifth.body).toMatchObject({ code: 'pin_locked', allowed_actions: ['fail', 'return'] })
      const right = await deliver(pin)
      expect(right.status).toBe(409)
      expect(right.body.code).toBe('pin_locked')
      // Short PINs are refused by shape before anything is counted.
      expect((await deliver('12')).status).toBe(422)
      const returned = await call('POST', `/v1/deliveries/${rx.delivery_id}/return`, driver, {
        from: fleet.driverId,
        to: pharmacyId,
        signature: 's',
      })
      expect(returned.status, JSON.stringify(returned.body)).toBe(200)
    })

    it('issues a new PIN, with its own tries, for a reattempt: a PIN locked on the first attempt does not lock the second', async () => {
      const rx = await pickedUp()
      const { proof } = await proofFor(rx.delivery_id, rx.rx_id)
      const first = (await pinOf(api, rx.delivery_id))!
      const deliver = (pin: string) =>
        call(
          'POST',
          `/v1/deliveries/${rx.delivery_id}/deliver`,
          driver,
          { verification: { method: 'otp', evidence: 'ok' }, proof: { ...proof, pin } },
          { 'idempotency-key': `pin-${Math.random()}` },
        )
      for (let i = 0; i < 5; i++) await deliver(first === '000000' ? '111111' : '000000')
      expect((await deliver(first)).body.code).toBe('pin_locked')
      const failed = await call('POST', `/v1/deliveries/${rx.delivery_id}/fail`, driver, { reason: 'refused', note: 'PIN locked' })
      expect(failed.status, JSON.stringify(failed.body)).toBe(200)
      const again = await api.post(`/v1/deliveries/${rx.delivery_id}/reattempt`, admin, {})
      expect(again.status, again.text).toBe(200)
      const picked = await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, {
        from: fleet.driverId,
        to: fleet.driverId,
        signature: 's',
      })
      expect(picked.status, picked.text).toBe(200)
      const second = (await pinOf(api, rx.delivery_id))!
      expect(second).toMatch(/^\d{6}$/)
      const delivered = await deliver(second)
      expect(delivered.status, JSON.stringify(delivered.body)).toBe(200)
      expect(delivered.body.status).toBe('DELIVERED')
    })

    it('keeps the PIN sealed: no stored row holds it in clear, nor a hash of a body that carried it', async () => {
      const rx = await pickedUp()
      const { proof } = await proofFor(rx.delivery_id, rx.rx_id)
      const pin = (await pinOf(api, rx.delivery_id))!
      const body = { verification: { method: 'otp', evidence: 'ok' }, proof: { ...proof, pin } }
      const done = await call('POST', `/v1/deliveries/${rx.delivery_id}/deliver`, driver, body, { 'idempotency-key': 'deliver-with-pin' })
      expect(done.status).toBe(200)
      const stored = await api.service.db
        .selectFrom('delivery_pins')
        .select('pin')
        .where('delivery_id', '=', rx.delivery_id)
        .executeTakeFirstOrThrow()
      expect(stored.pin).toMatch(/^rxs1\./)
      const rows = await everyStoredRow(api, store.name, ['attachment_chunks'])
      expect(rows).not.toContain(`"${pin}"`)
      const bodyHash = createHash('sha256')
        .update(`POST /v1/deliveries/${rx.delivery_id}/deliver\n${JSON.stringify(body)}`)
        .digest('hex')
      expect(rows).not.toContain(bodyHash)
    })
  })
}

/**
 * An upload over a raw socket: the headers, then up to `total` bytes in 64 KiB writes, stopping as
 * soon as the answer arrives. Answers its status, its body and how many body bytes were sent.
 */
export function rawUpload(
  base: string,
  path: string,
  token: string,
  headers: Record<string, string>,
  total: number,
): Promise<{ status: number; body: string; sent: number }> {
  const url = new URL(path, base)
  return new Promise((resolve, reject) => {
    let sent = 0
    let answered = false
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'image/jpeg', ...headers },
      },
      (res) => {
        answered = true
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString(), sent })
          req.destroy()
        })
      },
    )
    req.on('error', (error) => {
      if (!answered) reject(error)
    })
    req.flushHeaders()
    const piece = Buffer.alloc(64 * 1024, 0xab)
    piece[0] = 0xff
    piece[1] = 0xd8
    piece[2] = 0xff
    const pump = () => {
      if (answered || req.destroyed) return
      if (sent >= total) return
      sent += piece.length
      if (req.write(piece)) setImmediate(pump)
      else req.once('drain', pump)
    }
    setImmediate(pump)
  })
}
