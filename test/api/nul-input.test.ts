import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'

// U+0000 (NUL) in a request: PostgreSQL refuses it in a text parameter, so every lookup with one
// in a path, query, form or Basic credentials answered 500 there (and 404 on SQLite), and a JSON
// string with one either answered 500 or was stored on one engine and not the other. Both stores.
const { url } = await reachablePostgres()
const stores = [sqliteStore, ...(url ? [postgresStore(url)] : [])]
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

type OpenApi = { paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>> }

for (const store of stores)
  describe(`a request holding U+0000 on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let pharmacyId: string
    const rowCount = async () => {
      const row = await api.service.db
        .selectFrom('prescriptions')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
      return Number(row.n)
    }

    beforeAll(async () => {
      api = await store.start()
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
    })
    afterAll(() => api.stop())

    it('is answered 422 with a pointer on every route, a NUL in any of its path ids or query parameters', async () => {
      const doc = (await api.get('/v1/openapi.json', admin)).body as OpenApi
      const answers: string[] = []
      for (const [template, operations] of Object.entries(doc.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          const request = (path: string) =>
            api.request(method.toUpperCase(), path, {
              token: admin,
              raw: method === 'get' || method === 'delete' ? undefined : '{}',
              headers: { 'content-type': 'application/json', 'idempotency-key': `nul-${Math.random()}` },
            })
          if (template.includes('{')) {
            const res = await request(template.replace(/\{[^}]+\}/g, 'a%00b'))
            answers.push(`${method} ${template} ${res.status} ${res.body.error ?? res.body.errors?.[0]?.pointer}`)
          }
          const withIds = template.replace(
            /\{[^}]+\}/g,
            template.startsWith('/v1/pharmacies') ? pharmacyId : 'xx_01jd0000000000000000000000',
          )
          for (const { name } of (operation.parameters ?? []).filter((p) => p.in === 'query')) {
            const res = await request(`${withIds}?${name}=a%00b`)
            answers.push(`${method} ${template}?${name} ${res.status} ${res.body.error ?? res.body.errors?.[0]?.pointer}`)
          }
        }
      }
      expect(answers.length).toBeGreaterThan(100)
      for (const answer of answers) {
        const [method, where, status, pointer] = answer.split(' ')
        const query = where!.split('?')[1]
        // OAuth's endpoints answer in OAuth's format (RFC 6749 §5.2).
        const expected = where!.startsWith('/oauth/') ? '400 invalid_request' : `422 ${query ? `/query/${query}` : '/path'}`
        expect(`${method} ${where} ${status} ${pointer}`).toBe(`${method} ${where} ${expected}`)
      }
    })

    it('is answered 422 in a JSON string or member name, and nothing is stored', async () => {
      const before = await rowCount()
      const base = `"pharmacy_id":"${pharmacyId}","cold_chain":false`
      for (const [body, pointer] of [
        [`{${base},"patient_id":"pt_\\u0000"}`, '/patient_id'],
        [`{${base},"patient_id":"pt_1","metadata":{"note":"a\\u0000b"}}`, '/metadata/note'],
        [`{${base},"patient_id":"pt_1","metadata":{"a\\u0000":"b"}}`, '/metadata'],
      ]) {
        const res = await api.request('POST', '/v1/prescriptions', {
          token: admin,
          raw: body,
          headers: { 'content-type': 'application/json', 'idempotency-key': `nul-${Math.random()}` },
        })
        expect([res.status, res.body.errors], body).toEqual([422, [{ pointer, message: expect.stringMatching(/U\+0000/) }]])
      }
      expect(await rowCount()).toBe(before)
      // The text "\u0000", a backslash and five characters, is text like any other.
      const kept = await api.prescription(admin, { pharmacy_id: pharmacyId, patient_id: 'pt_\\u0000' })
      expect((await api.get(`/v1/prescriptions/${kept.rx_id}`, admin)).body.patient_id).toBe('pt_\\u0000')
    })

    it("is answered in OAuth's format at the token endpoint, in the form or the Basic credentials", async () => {
      const token = (body: string, authorization?: string) =>
        api.service.app.request('/oauth/token', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...(authorization ? { authorization } : {}) },
          body,
        })
      const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`
      for (const res of [
        await token('grant_type=client_credentials&client_id=a%00b&client_secret=x'),
        await token('grant_type=client_credentials', basic('a\u0000b:secret')),
        await token('grant_type=client_credentials', basic('a%00b:secret')),
      ]) {
        expect(res.status).toBe(400)
        expect(await res.json()).toEqual({ error: 'invalid_request', error_description: expect.stringMatching(/U\+0000/) })
      }
      expect((await api.service.app.request('/oauth/authorize?client_id=a%00b')).status).toBe(400)
    })

    it('is answered 422 on the pages outside the API', async () => {
      for (const path of ['/track?token=a%00b', '/embed/dashboard?token=a%00b', '/account/setup?token=a%00b']) {
        expect((await api.service.app.request(path)).status, path).toBe(422)
      }
      const setup = await api.service.app.request('/account/setup', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'token=a%00b&password=x&confirm=x',
      })
      expect(setup.status).toBe(422)
    })
  })
