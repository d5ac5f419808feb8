import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { signedInPerson } from '../helpers/users.js'

// A stability version added by a person is signed, meaning "approved" (docs/part11.md); a
// machine client cannot sign and adds unsigned versions.
const STABILITY = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [{ min_c: 8, max_c: 25, allowed_s: 3600 }],
  freeze_thaw_max: null,
  source: 'label',
}

describe('signed stability versions', () => {
  let api: TestApi
  let admin: string
  let productId: string
  let pharmacist: Awaited<ReturnType<typeof signedInPerson>>
  beforeAll(async () => {
    api = await startTestService({ PASSWORD_SCRYPT_LOG2_N: '10' })
    admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    productId = (
      await api.post('/v1/products', admin, { ndc: '00002-8215-01', name: 'Insulin', pharmacy_id: pharmacy.id, stability: STABILITY })
    ).body.id
    pharmacist = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: pharmacy.id })
  })
  afterAll(() => api.stop())

  const put = (token: string, body: object) => api.request('PUT', `/v1/products/${productId}/stability`, { token, body })
  const versions = async () => (await api.get(`/v1/products/${productId}/stability/versions`, admin)).body.data

  it('asks a person to sign, refuses a wrong password or meaning, and records the approval with name, time and meaning', async () => {
    const unsigned = await put(pharmacist.token, { stability: STABILITY })
    expect(unsigned.status).toBe(422)
    expect(unsigned.body.errors).toEqual([expect.objectContaining({ pointer: '/signature' })])
    const wrong = await put(pharmacist.token, { stability: STABILITY, signature: { meaning: 'approved', password: 'not it at all' } })
    expect(wrong.status).toBe(401)
    expect(wrong.body.code).toBe('signature_failed')
    const meaning = await put(pharmacist.token, { stability: STABILITY, signature: { meaning: 'released', password: pharmacist.password } })
    expect(meaning.status).toBe(422)
    expect(await versions()).toHaveLength(1)

    const signed = await put(pharmacist.token, { stability: STABILITY, signature: { meaning: 'approved', password: pharmacist.password } })
    expect(signed.status, signed.text).toBe(201)
    expect(signed.body).toMatchObject({
      version: 2,
      signature: { signer: pharmacist.user.id, name: 'A pharmacist', meaning: 'approved', method: 'password' },
      signature_verified: true,
    })
    expect(signed.text).not.toContain(pharmacist.password)

    // The signature is its own record in the audit chain, right after the request's, and the chain verifies.
    const auditor = await api.adminToken('audit:read')
    type Row = { action?: string; pos: number; signature?: unknown; status: number }
    const own = (await api.get(`/v1/audit-events?action=signature.approved`, auditor)).body.data as Row[]
    expect(own).toHaveLength(1)
    expect(own[0]!.signature).toEqual(signed.body.signature)
    const trail = (await api.get(`/v1/audit-events?user=${pharmacist.user.id}&limit=100`, auditor)).body.data as Row[]
    const request = trail.find((r) => r.pos === own[0]!.pos - 1)
    expect(request).toMatchObject({ method: 'PUT', path: `/v1/products/${productId}/stability`, status: 201 })
    expect((await api.get('/v1/audit-events/verify', auditor)).body.valid).toBe(true)
    expect(JSON.stringify(trail)).not.toContain(pharmacist.password)
  })

  it('lets a machine client add an unsigned version, never a signed one', async () => {
    expect((await put(admin, { stability: STABILITY, signature: { meaning: 'approved', password: 'x' } })).body.code).toBe(
      'signature_required_person',
    )
    const machine = await put(admin, { stability: STABILITY })
    expect(machine.status).toBe(201)
    expect(machine.body).toMatchObject({ version: 3, signature: null, signature_verified: null })
  })

  it('shows a signature moved onto another version as not verified', async () => {
    const [, second] = await versions()
    await api.service.db
      .updateTable('product_stability_versions')
      .set({ signature: JSON.stringify(second.signature) })
      .where('product_id', '=', productId)
      .where('version', '=', 3)
      .execute()
    const [, stillGood, moved] = await versions()
    expect(stillGood.signature_verified).toBe(true)
    expect(moved).toMatchObject({ signature: second.signature, signature_verified: false })
  })
})
