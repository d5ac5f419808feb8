import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { decodeProtectedHeader } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { buildService } from '../../src/service.js'
import { REDIRECT, signIn } from '../auth/signin-fixtures.js'
import { browser, pkce } from '../helpers/browser.js'
import { TEST_ENV, withApi, type TestApi } from '../helpers/service.js'

const ADMIN = { id: 'cl_cli_admin', secret: 'cli-test-admin-secret-0123456789' }

/** Each run starts tsx (a few seconds on a busy 2-core machine): a few at a time. */
async function inBatches<T>(jobs: (() => Promise<T>)[], size: number): Promise<T[]> {
  const results: T[] = []
  for (let i = 0; i < jobs.length; i += size) results.push(...(await Promise.all(jobs.slice(i, i + size).map((job) => job()))))
  return results
}

type Run = { code: number; stdout: string; stderr: string[]; json: any }

describe('operator CLI (npm run cli)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-cli-'))
  const started: TestApi[] = []
  let api: TestApi
  let admin: string
  let pharmacyId: string

  /**
   * `src/cli.ts …` against the test's DATA_DIR, as an operator would run it (`npm run cli`), through
   * tsx's loader in one node process: `npx tsx` would add npm's and tsx's own processes to every run.
   */
  function cli(...args: string[]): Promise<Run> {
    return cliIn(dataDir, ...args)
  }

  /** `cli(…)` with `input` on its stdin (`--password-stdin`). */
  function cliWithInput(input: string, ...args: string[]): Promise<Run> {
    return cliIn(dataDir, ...args, { input })
  }

  function cliIn(dir: string, ...argsAndInput: (string | { input: string })[]): Promise<Run> {
    const last = argsAndInput.at(-1)
    const input = typeof last === 'object' ? last.input : undefined
    const args = argsAndInput.filter((a): a is string => typeof a === 'string')
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dir, NODE_OPTIONS: '' }
    delete env.DATABASE_URL
    return new Promise((resolve) => {
      const child = execFile(
        process.execPath,
        ['--import', 'tsx', 'src/cli.ts', ...args],
        { env, timeout: 60_000 },
        (error, stdout, stderr) => {
          let json: unknown = null
          try {
            json = JSON.parse(stdout)
          } catch {
            /* help text, or nothing */
          }
          // npm may warn about its own configuration on stderr; that is not the CLI speaking.
          const lines = stderr.split('\n').filter((l) => l && !l.startsWith('npm warn'))
          resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr: lines, json })
        },
      )
      child.stdin?.end(input ?? '')
    })
  }

  /** The service in-process over the same SQLite file; a second call is a restart. */
  async function serviceOnSameStore(): Promise<TestApi> {
    const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir, ADMIN_CLIENT_ID: ADMIN.id, ADMIN_CLIENT_SECRET: ADMIN.secret })
    const service = withApi(await buildService(config))
    started.push(service)
    return service
  }

  async function token(on: TestApi, clientId: string, secret: string) {
    const res = await on.service.app.request('/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret }).toString(),
    })
    return { status: res.status, body: (await res.json()) as any }
  }

  beforeAll(async () => {
    api = await serviceOnSameStore()
    admin = await api.tokenFor(ADMIN.id, ADMIN.secret)
    pharmacyId = (await api.pharmacy(admin)).id
  })
  afterAll(async () => {
    for (const s of started) await s.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('explains itself with --help and exits 0', { timeout: 120_000 }, async () => {
    const run = await cli('--help')
    expect(run.code).toBe(0)
    for (const command of [
      'clients create',
      'clients list',
      'clients show',
      'clients rotate-secret',
      'clients revoke',
      'keys rotate',
      'keys rewrap',
      'store init',
    ])
      expect(run.stdout).toContain(command)
    const sub = await cli('clients', 'create', '--help')
    expect(sub.code).toBe(0)
    expect(sub.stdout).toContain('--auth-method')
  })

  it('answers bad arguments with one line on stderr and exit code 2', { timeout: 180_000 }, async () => {
    const cases: [string[], RegExp][] = [
      [[], /name a command/],
      [['clients'], /name a subcommand/],
      [['clients', 'create'], /--name is required/],
      [['clients', 'create', '--name', 'x', '--colour', 'red'], /unknown option '--colour'/],
      [['clients', 'create', '--name', 'x', '--scope', 'pharmacies:read everything'], /unknown scope "everything"/],
      [['clients', 'create', '--name', 'x', '--pharmacy', 'ph_01nosuchpharmacy'], /no such pharmacy/],
      [['clients', 'rotate-secret'], /missing <client_id>/],
      [['clients', 'rotate-secret', 'cl_x', '--overlap', 'a while'], /--overlap "a while" is not a duration/],
      [['clients', 'show', 'cl_01nosuchclient'], /no client cl_01nosuchclient/],
      [['keys', 'rotate', '--publish-ahead', '2d'], /longer than the maximum/],
    ]
    const runs = await inBatches(
      cases.map(
        ([args]) =>
          () =>
            cli(...args),
      ),
      3,
    )
    runs.forEach((run, i) => {
      const [args, message] = cases[i]!
      expect({ args, code: run.code, stdout: run.stdout }).toEqual({ args, code: 2, stdout: '' })
      expect(run.stderr, args.join(' ')).toHaveLength(1)
      expect(run.stderr[0]).toMatch(/^rxtrace: /)
      expect(run.stderr[0]).toMatch(message)
    })
  })

  it('creates a pharmacy-restricted client whose secret gets a token from the service', async () => {
    const run = await cli(
      'clients',
      'create',
      '--name',
      'Main St integration',
      '--scope',
      'pharmacies:read prescriptions:write',
      '--pharmacy',
      pharmacyId,
      '--auth-method',
      'client_secret_post',
    )
    expect(run.code).toBe(0)
    const client = run.json
    expect(client).toMatchObject({
      client_name: 'Main St integration',
      scope: 'pharmacies:read prescriptions:write',
      pharmacy_id: pharmacyId,
      fleet_id: null,
      token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['client_credentials'],
    })
    expect(client.client_id).toMatch(/^cl_/)
    expect(client.client_secret).toMatch(/^cs_/)

    const issued = await token(api, client.client_id, client.client_secret)
    expect(issued.status).toBe(200)
    expect(issued.body.scope).toBe('pharmacies:read prescriptions:write')
    const claims = JSON.parse(Buffer.from(issued.body.access_token.split('.')[1], 'base64url').toString())
    expect(claims).toMatchObject({ client_id: client.client_id, pharmacy_id: pharmacyId })
    expect((await api.get(`/v1/pharmacies/${pharmacyId}`, issued.body.access_token)).status).toBe(200)
    expect((await api.get('/v1/deliveries', issued.body.access_token)).status).toBe(403)

    const shown = await cli('clients', 'show', client.client_id)
    expect(shown.code).toBe(0)
    expect(shown.json).toMatchObject({ client_id: client.client_id, pharmacy_id: pharmacyId })
    expect(shown.stdout).not.toContain('secret"')
    expect(shown.stdout).not.toContain(client.client_secret)
  })

  it('rotates a client secret; the old one works for the overlap window only', { timeout: 60_000 }, async () => {
    const { json: client } = await cli('clients', 'create', '--name', 'rotating', '--auth-method', 'client_secret_post')
    const first = await cli('clients', 'rotate-secret', client.client_id, '--overlap', '1h')
    expect(first.code).toBe(0)
    expect(first.json.client_id).toBe(client.client_id)
    expect(Date.parse(first.json.previous_secret_expires_at) - Date.now()).toBeGreaterThan(59 * 60_000)
    expect((await token(api, client.client_id, client.client_secret)).status).toBe(200)
    expect((await token(api, client.client_id, first.json.client_secret)).status).toBe(200)

    const second = await cli('clients', 'rotate-secret', client.client_id, '--overlap', '0s')
    expect(second.code).toBe(0)
    expect((await token(api, client.client_id, first.json.client_secret)).status).toBe(401)
    expect((await token(api, client.client_id, client.client_secret)).status).toBe(401)
    expect((await token(api, client.client_id, second.json.client_secret)).status).toBe(200)
  })

  it(
    'rotates the signing key: published ahead, used after, old tokens and running instances keep working',
    {
      timeout: 60_000,
    },
    async () => {
      const adminToken = (on: TestApi) => on.tokenFor(ADMIN.id, ADMIN.secret)
      const before = await adminToken(api)
      const oldKid = decodeProtectedHeader(before).kid

      const ahead = await cli('keys', 'rotate', '--publish-ahead', '5m')
      expect(ahead.code).toBe(0)
      expect(Date.parse(ahead.json.activates_at) - Date.now()).toBeGreaterThan(4 * 60_000)
      const restarted = await serviceOnSameStore()
      const kids = (await restarted.request('GET', '/.well-known/jwks.json')).body.keys.map((k: { kid: string }) => k.kid)
      expect(kids).toEqual(expect.arrayContaining([oldKid, ahead.json.kid]))
      expect(decodeProtectedHeader(await adminToken(restarted)).kid).toBe(oldKid) // not signing yet

      const now = await cli('keys', 'rotate', '--publish-ahead', '0s')
      expect(now.code).toBe(0)
      const again = await serviceOnSameStore()
      expect(decodeProtectedHeader(await adminToken(again)).kid).toBe(now.json.kid)
      expect((await again.get(`/v1/pharmacies/${pharmacyId}`, before)).status).toBe(200) // signed by the retiring key
      // The instance started before the rotation accepts tokens the new key signed: it re-reads the key set.
      expect((await api.get(`/v1/pharmacies/${pharmacyId}`, await adminToken(again))).status).toBe(200)
    },
  )

  it('refuses a DATA_DIR without a store instead of creating an empty one; store init creates it', { timeout: 120_000 }, async () => {
    const parent = mkdtempSync(join(tmpdir(), 'rxtrace-cli-typo-'))
    const typo = join(parent, 'dtaa')
    try {
      const [refused, refusedList] = await Promise.all([cliIn(typo, 'clients', 'create', '--name', 'x'), cliIn(typo, 'clients', 'list')])
      for (const run of [refused, refusedList]) {
        expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: '' })
        expect(run.stderr).toHaveLength(1)
        expect(run.stderr[0]).toMatch(new RegExp(`^rxtrace: DATA_DIR=${typo}: no rxtrace store there .*store init`))
      }
      expect(existsSync(typo), 'nothing was created').toBe(false)

      const init = await cliIn(typo, 'store', 'init')
      expect(init.code).toBe(0)
      expect(init.json).toEqual({ store: 'sqlite', data_dir: typo })
      const listed = await cliIn(typo, 'clients', 'list')
      expect({ code: listed.code, json: listed.json }).toEqual({ code: 0, json: { data: [] } })
    } finally {
      rmSync(parent, { recursive: true, force: true })
    }
  })

  it('refuses a common password read from stdin, with one line saying why, and takes an unusual one', { timeout: 120_000 }, async () => {
    const args = ['users', 'create', '--email', 'cli.person@example.com', '--name', 'Cli Person', '--role', 'pharmacist']
    const [refused, named] = await Promise.all([
      cliWithInput('passwordpassword\n', ...args, '--pharmacy', pharmacyId, '--password-stdin'),
      cliWithInput('cli.person rules the world\n', ...args, '--pharmacy', pharmacyId, '--password-stdin'),
    ])
    expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 2, stderr: [expect.stringMatching(/^rxtrace: .*too common/)] })
    expect({ code: named.code, stderr: named.stderr }).toEqual({ code: 2, stderr: [expect.stringMatching(/^rxtrace: .*email/)] })
    const created = await cliWithInput('violet kettle under seven bridges\n', ...args, '--pharmacy', pharmacyId, '--password-stdin')
    expect(created.code).toBe(0)
    expect(created.json).toMatchObject({ email: 'cli.person@example.com', role: 'pharmacist' })
  })

  it('lists clients without secrets, and a revoked client gets no token', { timeout: 120_000 }, async () => {
    const { json: client } = await cli('clients', 'create', '--name', 'to be revoked', '--auth-method', 'client_secret_post')
    expect((await token(api, client.client_id, client.client_secret)).status).toBe(200)

    const revoked = await cli('clients', 'revoke', client.client_id)
    expect(revoked.code).toBe(0)
    expect(revoked.json).toEqual({ client_id: client.client_id, revoked_at: expect.stringMatching(/Z$/) })
    expect((await token(api, client.client_id, client.client_secret)).status).toBe(401)

    const [listed, again, unknown, rotate] = await Promise.all([
      cli('clients', 'list'),
      cli('clients', 'revoke', client.client_id),
      cli('clients', 'revoke', 'cl_01nosuchclient'),
      cli('clients', 'rotate-secret', client.client_id),
    ])
    expect(listed.code).toBe(0)
    const byId = new Map(listed.json.data.map((c: any) => [c.client_id, c]))
    expect(byId.get(ADMIN.id)).toMatchObject({ client_name: 'admin', revoked_at: null })
    expect(byId.get(client.client_id)).toMatchObject({ client_name: 'to be revoked', revoked_at: revoked.json.revoked_at })
    expect(listed.stdout).not.toContain('"client_secret"')
    expect(listed.stdout).not.toContain(client.client_secret)
    expect(again.json, 'revoking twice answers the first time').toEqual(revoked.json)
    expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({ code: 2, stderr: ['rxtrace: no client cl_01nosuchclient'] })
    expect({ code: rotate.code, stderr: rotate.stderr }).toEqual({
      code: 2,
      stderr: [`rxtrace: client ${client.client_id} is revoked; create a new one`],
    })
  })

  describe('users', () => {
    const PASSWORD = 'a passphrase from stdin 42'
    /** Whether `email` signs in with `password` on the service's own form. */
    async function signsIn(email: string, password: string): Promise<boolean> {
      const client = await api.post('/v1/oauth/clients', admin, {
        client_name: 'sign-in check',
        token_endpoint_auth_method: 'none',
        redirect_uris: [REDIRECT],
        first_party: true,
        scope: 'deliveries:read',
      })
      expect(client.status, client.text).toBe(201)
      const done = await signIn(
        browser(api.service),
        { client_id: client.body.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge },
        email,
        password,
      )
      return done.status === 303
    }

    it('creates a user with a setup link, or with a password from stdin who then signs in', { timeout: 120_000 }, async () => {
      const [linked, withPassword] = await Promise.all([
        cli('users', 'create', '--email', 'terry@example.com', '--name', 'Terry Tech', '--role', 'technician', '--pharmacy', pharmacyId),
        cliWithInput(
          `${PASSWORD}\n`,
          'users',
          'create',
          '--email',
          'Pat@Example.com',
          '--name',
          'Pat Pharmacist',
          '--role',
          'pharmacist',
          '--pharmacy',
          pharmacyId,
          '--password-stdin',
        ),
      ])
      expect(linked.code, linked.stderr.join('\n')).toBe(0)
      expect(linked.json).toMatchObject({ email: 'terry@example.com', role: 'technician', pharmacy_id: pharmacyId, disabled: false })
      expect(linked.json.id).toMatch(/^us_/)
      expect(linked.json.setup_url).toMatch(/\/account\/setup\?token=/)
      expect(linked.stderr.join('\n')).toContain('72 hours')
      const page = await browser(api.service).get(new URL(linked.json.setup_url).pathname + new URL(linked.json.setup_url).search)
      expect(page.status).toBe(200)
      expect(page.text).toContain('Terry Tech')

      expect(withPassword.code, withPassword.stderr.join('\n')).toBe(0)
      expect(withPassword.json).toMatchObject({ email: 'pat@example.com', role: 'pharmacist' })
      expect(withPassword.json.setup_url ?? null).toBeNull()
      expect(withPassword.stdout).not.toContain(PASSWORD)
      expect(await signsIn('pat@example.com', PASSWORD)).toBe(true)
    })

    it('lists and shows users without passwords; disable ends their sign-in', { timeout: 120_000 }, async () => {
      const [listed, shown] = await Promise.all([cli('users', 'list', '--limit', '100'), cli('users', 'list', '--limit', '1')])
      expect(listed.code).toBe(0)
      const pat = listed.json.data.find((u: { email: string }) => u.email === 'pat@example.com')
      expect(pat).toMatchObject({ name: 'Pat Pharmacist', disabled: false })
      expect(listed.json.data.map((u: { email: string }) => u.email)).toContain('terry@example.com')
      expect(listed.stdout).not.toMatch(/password|hash|scrypt/i)
      expect(shown.json.data).toHaveLength(1)
      expect(shown.json.next_cursor).toEqual(expect.any(String))

      const one = await cli('users', 'show', pat.id)
      expect(one.json).toMatchObject({ id: pat.id, email: 'pat@example.com', disabled: false })

      const disabled = await cli('users', 'disable', pat.id)
      expect(disabled.code, disabled.stderr.join('\n')).toBe(0)
      expect(disabled.json).toMatchObject({ id: pat.id, disabled: true })
      expect((await api.get(`/v1/users/${pat.id}`, admin)).body.disabled).toBe(true)
      expect(await signsIn('pat@example.com', PASSWORD)).toBe(false)
    })

    it('answers bad user arguments with one line and exit code 2', { timeout: 180_000 }, async () => {
      const create = ['users', 'create', '--email', 'x@example.com', '--name', 'X', '--role']
      const taken = { email: 'taken@example.com', name: 'Taken', role: 'technician', pharmacy_id: pharmacyId }
      expect((await api.post('/v1/users', admin, taken)).status).toBe(201)
      const cases: [() => Promise<Run>, RegExp][] = [
        [() => cli(...create, 'wizard', '--pharmacy', pharmacyId), /--role must be one of/],
        [() => cli(...create, 'technician', '--pharmacy', 'ph_01jzzzzzzzzzzzzzzzzzzzzzzz'), /--pharmacy/],
        [
          () => cli('users', 'create', '--email', 'Taken@example.com', '--name', 'Again', '--role', 'technician', '--pharmacy', pharmacyId),
          /email/,
        ],
        [() => cli('users', 'disable', 'us_01jzzzzzzzzzzzzzzzzzzzzzzz'), /no user us_01jzzzzzzzzzzzzzzzzzzzzzzz/],
        [() => cliWithInput('short\n', ...create, 'technician', '--pharmacy', pharmacyId, '--password-stdin'), /the password must be 12–/],
      ]
      const runs = await inBatches(
        cases.map(([run]) => run),
        3,
      )
      runs.forEach((run, i) => {
        const message = cases[i]![1]
        expect({ message, code: run.code, stdout: run.stdout }).toEqual({ message, code: 2, stdout: '' })
        expect(run.stderr, String(message)).toHaveLength(1)
        expect(run.stderr[0]).toMatch(/^rxtrace: /)
        expect(run.stderr[0]).toMatch(message)
      })
    })
  })
})
