import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allScopes } from '../../src/auth/scopes.js'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'
import { codeFor, PASSWORD, REDIRECT, tokenRequest } from './signin-fixtures.js'

/**
 * Refresh-token rotation on both entity stores: spending the presented token and storing the
 * family's next one are one transaction, so a failure between them loses nothing; two requests
 * presenting the same token at once cannot both get a next one.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

function describeRotation(store: StoreUnderTest) {
  describe(`refresh-token rotation on ${store.name}`, () => {
    let api: TestApi
    let clientId: string
    afterAll(async () => {
      await api?.stop()
      await store.cleanup()
    })
    beforeAll(async () => {
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' })
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      await api.post('/v1/users', admin, {
        email: 'pat@example.com',
        name: 'Pat Pharmacist',
        role: 'pharmacist',
        pharmacy_id: pharmacy.id,
        password: PASSWORD,
      })
      clientId = (
        await api.post('/v1/oauth/clients', admin, {
          client_name: 'Pharmacist Console',
          token_endpoint_auth_method: 'none',
          redirect_uris: [REDIRECT],
          first_party: true,
          scope: allScopes.join(' '),
        })
      ).body.client_id
    })

    async function firstRefreshToken(): Promise<string> {
      const { code, verifier } = await codeFor(api, clientId)
      const tokens = await tokenRequest(api, {
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
        client_id: clientId,
      })
      expect(tokens.status).toBe(200)
      return tokens.body.refresh_token as string
    }
    const refresh = (token: string) => tokenRequest(api, { grant_type: 'refresh_token', refresh_token: token, client_id: clientId })

    /** Makes every insert into refresh_tokens fail in the store itself, as a full disk or a lost connection would. */
    async function failingInserts(): Promise<() => Promise<void>> {
      const db = api.service.db
      if (store.name === 'sqlite') {
        await sql`create trigger refuse_refresh before insert on refresh_tokens begin select raise(abort, 'injected failure'); end`.execute(
          db,
        )
        return async () => void (await sql`drop trigger refuse_refresh`.execute(db))
      }
      await sql`create function refuse_refresh() returns trigger language plpgsql as $$ begin raise exception 'injected failure'; end $$`.execute(
        db,
      )
      await sql`create trigger refuse_refresh before insert on refresh_tokens for each row execute function refuse_refresh()`.execute(db)
      return async () => {
        await sql`drop trigger refuse_refresh on refresh_tokens`.execute(db)
        await sql`drop function refuse_refresh()`.execute(db)
      }
    }

    it('a failure while storing the next token leaves the presented one unspent: the family lives on', async () => {
      const first = await firstRefreshToken()
      const restore = await failingInserts()
      try {
        const failed = await api.service.app.request('/oauth/token', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: first, client_id: clientId }).toString(),
        })
        expect(failed.status).toBe(500)
      } finally {
        await restore()
      }
      // Spent in a separate commit, the token would now count as replayed and revoke the family.
      const retried = await refresh(first)
      expect(retried.status, JSON.stringify(retried.body)).toBe(200)
      expect((await refresh(retried.body.refresh_token)).status).toBe(200)
    })

    it('the same token presented twice at once: one rotation, the other is a replay that revokes the family', async () => {
      const first = await firstRefreshToken()
      const answers = await Promise.all([refresh(first), refresh(first)])
      expect(answers.map((a) => a.status).sort()).toEqual([200, 400])
      const winner = answers.find((a) => a.status === 200)!
      expect(answers.find((a) => a.status === 400)!.body.error).toBe('invalid_grant')
      // The replay revoked the family, the winner's new refresh token and access token with it.
      expect((await refresh(winner.body.refresh_token)).status).toBe(400)
      expect((await api.get('/v1/deliveries', winner.body.access_token)).status).toBe(401)
      const family = await api.service.db
        .selectFrom('refresh_tokens')
        .select(['revoked_at'])
        .where(
          'family_id',
          '=',
          api.service.db.selectFrom('refresh_tokens').select('family_id').where('access_jti', '=', decodeJti(winner.body.access_token)),
        )
        .execute()
      expect(family.length).toBe(2)
      expect(family.every((row) => row.revoked_at !== null)).toBe(true)
    })
  })
}

function decodeJti(jwt: string): string {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).jti as string
}

describeRotation(sqliteStore)
if (url) describeRotation(postgresStore(url))
