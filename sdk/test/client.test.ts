import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiError, ClientCredentials, createRxtraceClient, TokenRequestError } from '@rxtrace/sdk'
import { ADMIN, listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

describe('the SDK client against the real service', () => {
  let api: TestApi
  let baseUrl: string
  beforeAll(async () => {
    ;({ api, baseUrl } = await listeningService())
  })
  afterAll(() => api?.stop())

  it('is released with the service: same version as package.json and the document', async () => {
    const root = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    const sdk = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string; name: string }
    const doc = (await (await fetch(`${baseUrl}/v1/openapi.json`)).json()) as { info: { version: string } }
    expect(sdk.name).toBe('@rxtrace/sdk')
    expect(sdk.version).toBe(root.version)
    expect(doc.info.version).toBe(root.version)
  })

  it('sends typed requests with a client-credentials token and answers typed data or the problem', async () => {
    const rx = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const created = await rx.api.POST('/v1/fleets', { body: { name: 'Speedy Couriers', branding: { primary_color: '#0a7d5a' } } })
    expect(created.response.status).toBe(201)
    const fleet = await rx.api.GET('/v1/fleets/{id}', { params: { path: { id: created.data!.id } } })
    expect(fleet.data?.name).toBe('Speedy Couriers')
    const missing = await rx.api.GET('/v1/fleets/{id}', { params: { path: { id: 'fl_01jd0000000000000000000000' } } })
    expect(missing.response.status).toBe(404)
    expect(missing.error).toMatchObject({ code: 'not_found', status: 404 })
  })

  it('asks for one token for many concurrent requests, and renews it before it expires', async () => {
    let now = Date.now()
    const tokens = new ClientCredentials({ baseUrl, clientId: ADMIN.id, clientSecret: ADMIN.secret, scope: 'fleet:read', now: () => now })
    const rx = createRxtraceClient({ baseUrl, auth: tokens })
    const answers = await Promise.all(Array.from({ length: 20 }, () => rx.api.GET('/v1/fleets')))
    expect(answers.map((a) => a.response.status)).toEqual(Array(20).fill(200))
    expect(tokens.requests).toBe(1)
    now += 10 * 60_000 // 10 of the token's 15 minutes: still fresh
    await rx.api.GET('/v1/fleets')
    expect(tokens.requests).toBe(1)
    now += 4 * 60_000 + 5_000 // within the last minute: renewed before it lapses
    const renewed = await Promise.all([rx.api.GET('/v1/fleets'), rx.api.GET('/v1/fleets')])
    expect(renewed.map((a) => a.response.status)).toEqual([200, 200])
    expect(tokens.requests).toBe(2)
  })

  it('drops a token the API refused, and the next request gets a new one', async () => {
    const tokens = new ClientCredentials({ baseUrl, clientId: ADMIN.id, clientSecret: ADMIN.secret, scope: 'fleet:read' })
    const rx = createRxtraceClient({ baseUrl, auth: tokens })
    const first = await tokens.token()
    const revoked = await fetch(`${baseUrl}/oauth/revoke`, {
      method: 'POST',
      body: new URLSearchParams({ token: first }),
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${btoa(`${ADMIN.id}:${ADMIN.secret}`)}` },
    })
    expect(revoked.status).toBe(200)
    expect((await rx.api.GET('/v1/fleets')).response.status).toBe(401)
    expect((await rx.api.GET('/v1/fleets')).response.status).toBe(200)
    expect(tokens.requests).toBe(2)
  })

  it('refuses wrong credentials with the OAuth error', async () => {
    const tokens = new ClientCredentials({ baseUrl, clientId: ADMIN.id, clientSecret: 'not-the-secret' })
    await expect(tokens.token()).rejects.toThrow(TokenRequestError)
    await expect(tokens.token()).rejects.toMatchObject({ status: 401, error: 'invalid_client' })
  })

  it('iterates over every item of a list, page after page, with path and query parameters', async () => {
    const rx = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const fleet = (await rx.api.POST('/v1/fleets', { body: { name: 'Many Drivers Ltd' } })).data!
    const names = Array.from({ length: 7 }, (_, i) => `Driver ${i + 1}`)
    for (const name of names)
      expect((await rx.api.POST('/v1/fleets/{id}/drivers', { params: { path: { id: fleet.id } }, body: { name } })).response.status).toBe(
        201,
      )
    const seen: string[] = []
    for await (const driver of rx.list('/v1/fleets/{id}/drivers', { path: { id: fleet.id }, query: { limit: 3 } })) seen.push(driver.name)
    expect(seen.sort()).toEqual(names.sort())
    // Breaking out early fetches no further page; a refused page throws the problem.
    for await (const driver of rx.list('/v1/fleets/{id}/drivers', { path: { id: fleet.id }, query: { limit: 2 } })) {
      expect(driver.fleet_id).toBe(fleet.id)
      break
    }
    const refused = rx.list('/v1/fleets/{id}/drivers', { path: { id: 'fl_01jd0000000000000000000000' } })
    await expect(refused.next()).rejects.toThrow(ApiError)
  })
})
