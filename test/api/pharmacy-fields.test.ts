import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

// A pharmacy's identifiers and time zone: a typo is refused with a pointer at the field, never
// stored to surface later as a wrong pharmacy or a wrong local time.

const ADDRESS = { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' }

describe('pharmacy fields', () => {
  let api: TestApi
  let admin: string
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  const create = (extra: Record<string, unknown>) =>
    api.post('/v1/pharmacies', admin, { name: 'Main Street Pharmacy', address: ADDRESS, timezone: 'America/Chicago', ...extra })

  it('keeps a 7-digit NCPDP id, a 10-digit NPI with a good check digit, and an IANA time zone', async () => {
    // 1234567893 is CMS's own example of a valid NPI.
    const res = await create({ ncpdp_id: '0123456', npi: '1234567893', timezone: 'Europe/Berlin' })
    expect(res.status, res.text).toBe(201)
    expect(res.body).toMatchObject({ ncpdp_id: '0123456', npi: '1234567893', timezone: 'Europe/Berlin' })
    expect((await api.get(`/v1/pharmacies/${res.body.id}`, admin)).body).toMatchObject({ ncpdp_id: '0123456', npi: '1234567893' })
  })

  it.each([
    [{ ncpdp_id: '123456' }, '/ncpdp_id', /7 digits/],
    [{ ncpdp_id: '12345678' }, '/ncpdp_id', /7 digits/],
    [{ ncpdp_id: '12345a7' }, '/ncpdp_id', /7 digits/],
    [{ ncpdp_id: 1234567 }, '/ncpdp_id', /string/],
    [{ npi: '123456789' }, '/npi', /10 digits/],
    [{ npi: '12345678933' }, '/npi', /10 digits/],
    [{ npi: '１２３４５６７８９３' }, '/npi', /10 digits/], // full-width digits are not ASCII digits
    [{ npi: '1234567890' }, '/npi', /check digit/], // one digit off CMS's example: a typo
    [{ npi: '1234567839' }, '/npi', /check digit/], // two digits swapped
    [{ timezone: 'Mars/Olympus_Mons' }, '/timezone', /IANA time zone/],
    [{ timezone: '+05:00' }, '/timezone', /IANA time zone/],
    [{ timezone: '' }, '/timezone', /IANA time zone/],
  ])('refuses %j with 422 and a pointer at the field', async (extra, pointer, message) => {
    const res = await create(extra)
    expect(res.status, res.text).toBe(422)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    expect(res.body.code).toBe('validation_failed')
    expect(res.body.errors).toEqual([{ pointer, message: expect.stringMatching(message) }])
  })

  it('names every bad field at once', async () => {
    const res = await create({ ncpdp_id: '1', npi: '1', timezone: 'Nowhere' })
    expect(res.status).toBe(422)
    expect(res.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/ncpdp_id', '/npi', '/timezone'])
  })
})
