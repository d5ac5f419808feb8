import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { decodeJwt } from 'jose'
import { afterAll, describe, expect, it } from 'vitest'
import { allScopes } from '../../src/auth/scopes.js'
import { loadConfig } from '../../src/config.js'
import { buildService } from '../../src/service.js'
import { TEST_ENV, withApi, type TestApi } from '../helpers/service.js'

// ADMIN_CLIENT_ID / ADMIN_CLIENT_SECRET pin the admin client: each start creates it, or updates it
// to exactly these credentials — an operator who changes the secret (a leaked one, a rotation)
// restarts, and the old secret is refused from then on.

const ID = 'cl_pinned_admin'
const FIRST = 'first-pinned-secret-0123456789'
const SECOND = 'second-pinned-secret-9876543210'

describe('the pinned admin client', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-pinned-'))
  const running: TestApi[] = []
  afterAll(async () => {
    for (const api of running) await api.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  /** The service on the test's DATA_DIR (a SQLite file), pinned to `secret`; a second call is a restart. */
  async function startWith(secret: string): Promise<TestApi> {
    while (running.length) await running.pop()!.stop()
    const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir, ADMIN_CLIENT_ID: ID, ADMIN_CLIENT_SECRET: secret })
    const api = withApi(await buildService(config))
    running.push(api)
    return api
  }

  async function tokenStatus(api: TestApi, secret: string) {
    const res = await api.service.app.request('/oauth/token', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${ID}:${secret}`).toString('base64')}`,
      },
      body: 'grant_type=client_credentials',
    })
    return { status: res.status, body: (await res.json()) as { access_token?: string; error?: string } }
  }

  it('takes a changed secret on restart and refuses the old one', async () => {
    const first = await startWith(FIRST)
    expect((await tokenStatus(first, FIRST)).status).toBe(200)
    expect((await tokenStatus(first, SECOND)).status).toBe(401)

    const second = await startWith(SECOND)
    const issued = await tokenStatus(second, SECOND)
    expect(issued.status).toBe(200)
    expect(await tokenStatus(second, FIRST)).toMatchObject({ status: 401, body: { error: 'invalid_client' } })
    const shown = await second.get(`/v1/oauth/clients/${ID}`, issued.body.access_token!)
    expect(shown.status, shown.text).toBe(200)
    expect(shown.body).toMatchObject({ client_id: ID, client_name: 'admin', pharmacy_id: null, fleet_id: null })
  })

  it('is put back to every scope and no tenant if someone narrowed it in between', async () => {
    const api = await startWith(SECOND)
    const pharmacy = await api.pharmacy((await tokenStatus(api, SECOND)).body.access_token!)
    await api.service.db
      .updateTable('oauth_clients')
      .set({ scope: 'pharmacies:read', pharmacy_id: pharmacy.id })
      .where('client_id', '=', ID)
      .execute()
    const narrowed = decodeJwt((await tokenStatus(api, SECOND)).body.access_token!)
    expect(narrowed).toMatchObject({ scope: 'pharmacies:read', pharmacy_id: pharmacy.id })

    const restarted = await startWith(SECOND)
    const claims = decodeJwt((await tokenStatus(restarted, SECOND)).body.access_token!)
    expect(String(claims.scope).split(' ').sort()).toEqual([...allScopes].sort())
    expect(claims).not.toHaveProperty('pharmacy_id')
    expect(claims).not.toHaveProperty('fleet_id')
  })
})
