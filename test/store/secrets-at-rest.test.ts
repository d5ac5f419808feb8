import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import pg from 'pg'
import pino from 'pino'
import { Webhook } from 'standardwebhooks'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { buildService } from '../../src/service.js'
import type { EntityStoreOptions } from '../../src/store/database.js'
import { TEST_ENV, withApi, type TestApi } from '../helpers/service.js'
import { reachablePostgres } from '../helpers/stores.js'
import { waitFor } from '../helpers/wait.js'
import { startReceiver, type Receiver } from '../webhooks/receiver.js'

/**
 * The secrets the service must use again (token signing keys, webhook and writeback secrets,
 * the previous webhook secret of a rotation) are sealed under SECRETS_KEY: a copy of the store
 * alone, a SQLite file or every row of a PostgreSQL schema, holds none of them.
 */

const { url: postgresUrl, reasons } = await reachablePostgres()
if (!postgresUrl) console.warn(`Skipping the PostgreSQL secrets-at-rest suite: ${reasons.join('; ')}`)

const newKey = () => randomBytes(32).toString('base64')
const dirs: string[] = []
const running: TestApi[] = []
const receivers: Receiver[] = []
const schemas: string[] = []
afterEach(async () => {
  for (const api of running.splice(0)) await api.stop()
  for (const receiver of receivers.splice(0)) await receiver.close()
})
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  if (postgresUrl && schemas.length) {
    const client = new pg.Client({ connectionString: postgresUrl })
    await client.connect()
    for (const schema of schemas) await client.query(`drop schema if exists "${schema}" cascade`)
    await client.end()
  }
})

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rxtrace-secrets-'))
  dirs.push(dir)
  return dir
}

type Log = { level: number; msg: string; path?: string }

/** The whole service, started, on `dir` (SQLite files there unless `store` says otherwise); its log lines kept. */
async function serviceOn(dir: string, env: Record<string, string> = {}, store?: EntityStoreOptions) {
  const log: Log[] = []
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, done) {
        log.push(JSON.parse(String(chunk)))
        done()
      },
    }),
  )
  const config = loadConfig({ ...TEST_ENV, DATA_DIR: dir, LOG_LEVEL: 'info', ...env })
  const api = withApi(await buildService(config, { logger, ...(store ? { store } : {}) }))
  running.push(api)
  await api.service.start()
  return { api, log }
}

async function stop(api: TestApi) {
  running.splice(running.indexOf(api), 1)
  await api.stop()
}

/** What a thief would want from the store: every signing key's private scalar and every HMAC secret. */
type Secrets = { privateD: string[]; webhookSecrets: string[] }

/**
 * Two signing keys (one rotation), a webhook whose secret was rotated (its first secret still
 * signs, as the previous one), and a pharmacy with a writeback. Returns what was made and the
 * secrets the API showed, once, at creation.
 */
async function makeSecrets(api: TestApi, receiverUrl: string) {
  const admin = await api.adminToken()
  const currentD = async () => (await api.service.keys.signingKey()).signer.export({ format: 'jwk' }).d!
  const privateD = [await currentD()]
  expect((await api.post('/v1/oauth/signing-keys/rotate', admin, {})).status).toBe(200)
  privateD.push(await currentD())
  const token = await api.adminToken() // signed by the second key
  const pharmacy = await api.post('/v1/pharmacies', admin, {
    name: 'Writeback Pharmacy',
    address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
    timezone: 'America/Chicago',
    writeback: { url: `${receiverUrl}/writeback` },
  })
  expect(pharmacy.status).toBe(201)
  const webhook = await api.post('/v1/webhooks', admin, { url: `${receiverUrl}/hooks`, events: ['delivery.created'] })
  expect(webhook.status).toBe(201)
  const rotated = await api.post(`/v1/webhooks/${webhook.body.id}/rotate-secret`, admin, {})
  expect(rotated.status).toBe(200)
  const webhookSecrets = [webhook.body.secret as string, rotated.body.secret as string, pharmacy.body.writeback.secret as string]
  for (const secret of webhookSecrets) expect(secret).toMatch(/^whsec_/)
  return { token, pharmacyId: pharmacy.body.id as string, secrets: { privateD, webhookSecrets } satisfies Secrets }
}

/** Each secret as text, as its raw bytes, and in the other encodings a careless store might use. */
function needles({ privateD, webhookSecrets }: Secrets): { label: string; bytes: Buffer }[] {
  const forms = (label: string, raw: Buffer, texts: string[]) => [
    { label: `${label} (raw bytes)`, bytes: raw },
    ...[...texts, raw.toString('base64'), raw.toString('base64url'), raw.toString('hex')].map((t) => ({
      label: `${label} as "${t}"`,
      bytes: Buffer.from(t),
    })),
  ]
  return [
    ...privateD.flatMap((d, i) => forms(`signing key ${i + 1}'s private d`, Buffer.from(d, 'base64url'), [d])),
    ...webhookSecrets.flatMap((s, i) => forms(`HMAC secret ${i + 1}`, Buffer.from(s.slice('whsec_'.length), 'base64'), [s])),
    { label: 'a JWK private member', bytes: Buffer.from('"d":"') },
    { label: 'a PEM private key', bytes: Buffer.from('PRIVATE KEY') },
  ]
}

function found(haystack: Buffer, secrets: Secrets): string[] {
  return needles(secrets)
    .filter(({ bytes }) => haystack.includes(bytes))
    .map(({ label }) => label)
}

/** Waits for the next signed delivery.created to `receiver` and verifies it with `secret`, as a subscriber would. */
async function deliveredAndVerified(api: TestApi, receiver: Receiver, pharmacyId: string, secret: string) {
  const before = receiver.requests.filter((r) => r.url === '/hooks').length
  const rx = await api.prescription(await api.adminToken(), { pharmacy_id: pharmacyId })
  await waitFor(() => receiver.requests.filter((r) => r.url === '/hooks').length > before, 20_000, 'the webhook')
  const request = receiver.requests.filter((r) => r.url === '/hooks')[before]!
  const payload = new Webhook(secret).verify(request.body, {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  }) as { delivery_id: string }
  expect(payload.delivery_id).toBe(rx.delivery_id)
}

describe('secrets at rest: a copy of the store alone holds no key material', () => {
  it('SQLite: no file in DATA_DIR but the key file holds a signing key or an HMAC secret, in any encoding', async () => {
    const dir = dataDir()
    const receiver = await startReceiver()
    receivers.push(receiver)
    const { api } = await serviceOn(dir, { SECRETS_KEY: newKey() })
    const { secrets } = await makeSecrets(api, receiver.url)
    // The needles are real: the service's own memory holds them (this proves the search can find them).
    expect(found(Buffer.from(JSON.stringify(secrets)), secrets).length).toBeGreaterThan(0)
    await stop(api)

    const files = readdirSync(dir).filter((f) => statSync(join(dir, f)).isFile())
    expect(files).toContain('rxtrace.db')
    const dump = Buffer.concat(files.map((f) => readFileSync(join(dir, f))))
    expect(found(dump, secrets)).toEqual([])
  })

  it.skipIf(!postgresUrl)('PostgreSQL: no row of any table holds a signing key or an HMAC secret', async () => {
    const schema = `rx_test_${randomBytes(6).toString('hex')}`
    schemas.push(schema)
    const receiver = await startReceiver()
    receivers.push(receiver)
    const { api } = await serviceOn(dataDir(), { SECRETS_KEY: newKey() }, { kind: 'postgres', url: postgresUrl!, schema })
    const { secrets } = await makeSecrets(api, receiver.url)
    await stop(api)

    const client = new pg.Client({ connectionString: postgresUrl! })
    await client.connect()
    try {
      const tables = await client.query<{ name: string }>(
        `select table_name as name from information_schema.tables where table_schema = $1 and table_type = 'BASE TABLE'`,
        [schema],
      )
      expect(tables.rows.map((t) => t.name)).toEqual(expect.arrayContaining(['signing_keys', 'webhook_endpoints', 'idempotency_keys']))
      let dump = ''
      for (const { name } of tables.rows) {
        const rows = await client.query<{ row: string }>(`select t::text as row from "${schema}"."${name}" t`)
        dump += rows.rows.map((r) => r.row).join('\n')
      }
      expect(dump.length).toBeGreaterThan(0)
      expect(found(Buffer.from(dump), secrets)).toEqual([])
    } finally {
      await client.end()
    }
  })
})

describe('the service uses its sealed secrets again', () => {
  it('after a restart with the same key, tokens issued before still verify and webhooks are signed with the same secrets', async () => {
    const dir = dataDir()
    const key = newKey()
    const receiver = await startReceiver()
    receivers.push(receiver)
    const first = await serviceOn(dir, { SECRETS_KEY: key })
    const { token, pharmacyId, secrets } = await makeSecrets(first.api, receiver.url)
    await stop(first.api)

    const { api } = await serviceOn(dir, { SECRETS_KEY: key })
    expect((await api.get('/v1/pharmacies', token)).status).toBe(200)
    // Within the rotation's overlap both secrets sign: a subscriber on either one verifies.
    await deliveredAndVerified(api, receiver, pharmacyId, secrets.webhookSecrets[0]!)
    await deliveredAndVerified(api, receiver, pharmacyId, secrets.webhookSecrets[1]!)
  })

  it('a first start with no key generates one into a 0600 file in DATA_DIR, says so once, and the next start uses it', async () => {
    const dir = dataDir()
    const receiver = await startReceiver()
    receivers.push(receiver)
    const first = await serviceOn(dir)
    const { token, pharmacyId, secrets } = await makeSecrets(first.api, receiver.url)
    await stop(first.api)
    const keyFile = join(dir, 'secrets.key')
    expect((statSync(keyFile).mode & 0o777).toString(8)).toBe('600')
    const keyText = readFileSync(keyFile, 'utf8')
      .split('\n')
      .find((l) => l && !l.startsWith('#'))!
    const said = first.log.filter((l) => l.msg.includes('generated a key-encryption key'))
    expect(said).toHaveLength(1)
    expect(said[0]!.path).toBe(keyFile)
    expect(JSON.stringify(first.log)).not.toContain(keyText)

    const second = await serviceOn(dir)
    expect(second.log.filter((l) => l.msg.includes('generated a key-encryption key'))).toEqual([])
    expect(readFileSync(keyFile, 'utf8')).toContain(keyText)
    expect((await second.api.get('/v1/pharmacies', token)).status).toBe(200)
    await deliveredAndVerified(second.api, receiver, pharmacyId, secrets.webhookSecrets[1]!)
  })

  it('a store whose secrets an older version wrote in clear is sealed at start-up, and they keep working', async () => {
    const dir = dataDir()
    const key = newKey()
    const receiver = await startReceiver()
    receivers.push(receiver)
    const first = await serviceOn(dir, { SECRETS_KEY: key })
    const { token, pharmacyId, secrets } = await makeSecrets(first.api, receiver.url)
    // What a store written before sealing holds: the JWKs and the whsec_ secrets themselves.
    const db = first.api.service.db
    const endpoints = await db.selectFrom('webhook_endpoints').select(['id', 'secret', 'previous_secret']).execute()
    const box = first.api.service.secrets
    for (const e of endpoints)
      await db
        .updateTable('webhook_endpoints')
        .set({
          secret: box.open(`webhook_endpoints:${e.id}`, e.secret),
          previous_secret: e.previous_secret && box.open(`webhook_endpoints:${e.id}`, e.previous_secret),
        })
        .where('id', '=', e.id)
        .execute()
    for (const k of await db.selectFrom('signing_keys').select(['kid', 'private_jwk']).execute())
      await db
        .updateTable('signing_keys')
        .set({ private_jwk: box.open(`signing_keys:${k.kid}`, k.private_jwk) })
        .where('kid', '=', k.kid)
        .execute()
    expect(JSON.stringify(await db.selectFrom('webhook_endpoints').select('secret').execute())).toContain('whsec_')
    await stop(first.api)

    const { api, log } = await serviceOn(dir, { SECRETS_KEY: key })
    expect(log.find((l) => l.msg.startsWith('sealed secrets the store held in clear'))).toMatchObject({ sealed: 5 })
    const rows = JSON.stringify([
      await api.service.db.selectFrom('webhook_endpoints').selectAll().execute(),
      await api.service.db.selectFrom('signing_keys').selectAll().execute(),
    ])
    expect(found(Buffer.from(rows), secrets)).toEqual([])
    expect((await api.get('/v1/pharmacies', token)).status).toBe(200)
    await deliveredAndVerified(api, receiver, pharmacyId, secrets.webhookSecrets[1]!)
  })

  it('a store sealed under another key stops the start with one line naming SECRETS_KEY, and never prints a key', async () => {
    const dir = dataDir()
    const key = newKey()
    const first = await serviceOn(dir, { SECRETS_KEY: key })
    await stop(first.api)
    const wrong = newKey()
    const config = loadConfig({ ...TEST_ENV, DATA_DIR: dir, SECRETS_KEY: wrong })
    const refused = await buildService(config).then(
      (service) => {
        void service.stop()
        return null
      },
      (error: Error) => error,
    )
    expect(refused?.constructor.name).toBe('StartupError')
    expect(refused!.message).toMatch(/^SECRETS_KEY: the store's secrets are sealed under key [\w-]+, which this process does not hold/)
    expect(refused!.message.split('\n')).toHaveLength(1)
    expect(refused!.message).not.toContain(key)
    expect(refused!.message).not.toContain(wrong)
  })
})

/** `npx tsx src/cli.ts …` on `dir` with `env`, as an operator would run it. */
function cli(dir: string, env: Record<string, string>, ...args: string[]): Promise<{ code: number; json: any; stderr: string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '', DATA_DIR: dir, ...env }
  delete childEnv.DATABASE_URL
  return new Promise((resolve) => {
    execFile('npx', ['tsx', 'src/cli.ts', ...args], { env: childEnv, timeout: 120_000 }, (error, stdout, stderr) => {
      let json: unknown = null
      try {
        json = JSON.parse(stdout)
      } catch {
        /* nothing printed */
      }
      resolve({ code: error ? Number(error.code ?? 1) : 0, json, stderr })
    })
  })
}

describe('rotating the key-encryption key (keys rewrap)', () => {
  it(
    'old key → new key: the service with both keeps working, rewrap moves every secret, then the old key can go',
    { timeout: 240_000 },
    async () => {
      const dir = dataDir()
      const [oldKey, newKey_] = [newKey(), newKey()]
      const receiver = await startReceiver()
      receivers.push(receiver)
      const before = await serviceOn(dir, { SECRETS_KEY: oldKey })
      const { token, pharmacyId, secrets } = await makeSecrets(before.api, receiver.url)
      await stop(before.api)

      // Every copy gets the new key as current and the old one as previous: everything still opens.
      const both = await serviceOn(dir, { SECRETS_KEY: newKey_, SECRETS_KEY_PREVIOUS: oldKey })
      expect((await both.api.get('/v1/pharmacies', token)).status).toBe(200)
      await deliveredAndVerified(both.api, receiver, pharmacyId, secrets.webhookSecrets[1]!)
      // A secret made now is sealed under the new key.
      const admin = await both.api.adminToken()
      const made = await both.api.post('/v1/webhooks', admin, { url: `${receiver.url}/other`, events: ['delivery.created'] })
      expect(made.status).toBe(201)

      // Rewrapped while that copy runs.
      const rewrap = await cli(dir, { SECRETS_KEY: newKey_, SECRETS_KEY_PREVIOUS: oldKey }, 'keys', 'rewrap')
      expect(rewrap, rewrap.stderr).toMatchObject({ code: 0, json: { key_id: both.api.service.secrets.currentKeyId, remaining: 0 } })
      expect(rewrap.json.rewrapped).toBe(6) // two signing keys, the v1a webhook key, a webhook's secret and previous secret, the writeback secret
      expect(rewrap.json.already_current).toBe(1) // the webhook made under the new key
      expect((await both.api.get('/v1/pharmacies', token)).status).toBe(200)
      await deliveredAndVerified(both.api, receiver, pharmacyId, secrets.webhookSecrets[1]!)
      await stop(both.api)

      // The old key removed: tokens signed before the rotation verify, webhooks still carry the same signatures.
      const after = await serviceOn(dir, { SECRETS_KEY: newKey_ })
      expect((await after.api.get('/v1/pharmacies', token)).status).toBe(200)
      await deliveredAndVerified(after.api, receiver, pharmacyId, secrets.webhookSecrets[1]!)
      await stop(after.api)

      // And the old key alone opens nothing any more.
      const refused = await buildService(loadConfig({ ...TEST_ENV, DATA_DIR: dir, SECRETS_KEY: oldKey })).then(
        (service) => (void service.stop(), null),
        (error: Error) => error.message,
      )
      expect(refused).toMatch(/^SECRETS_KEY: the store's secrets are sealed under key /)
    },
  )
})

describe('the key-encryption key in the configuration', () => {
  const refusal = (env: Record<string, string>) => {
    try {
      loadConfig({ ...TEST_ENV, ...env })
      return null
    } catch (error) {
      return (error as Error).message
    }
  }

  it('a SECRETS_KEY that is not 32 bytes of base64 is refused in one line that names it and does not print it', () => {
    const short = randomBytes(16).toString('base64')
    const line = refusal({ SECRETS_KEY: short })
    expect(line).toBe('invalid configuration: SECRETS_KEY=(hidden): must be 32 random bytes in base64, e.g. from `openssl rand -base64 32`')
    expect(refusal({ SECRETS_KEY: newKey(), SECRETS_KEY_PREVIOUS: `${newKey()},${short}` })).toMatch(
      /^invalid configuration: SECRETS_KEY_PREVIOUS=\(hidden\): each comma-separated key must be 32 random bytes/,
    )
  })

  it('no secret variable is echoed in a refusal: ADMIN_CLIENT_SECRET too short', () => {
    const line = refusal({ ADMIN_CLIENT_SECRET: 'hunter2' })
    expect(line).toMatch(/^invalid configuration: ADMIN_CLIENT_SECRET=\(hidden\): /)
    expect(line).not.toContain('hunter2')
  })

  it('DATABASE_URL without a key is refused naming SECRETS_KEY: copies sharing a database need the same key', () => {
    expect(refusal({ DATABASE_URL: 'postgres://db/rxtrace' })).toMatch(/^invalid configuration: SECRETS_KEY="": required with DATABASE_URL/)
    expect(refusal({ DATABASE_URL: 'postgres://db/rxtrace', SECRETS_KEY: newKey() })).toBeNull()
    expect(refusal({ DATABASE_URL: 'postgres://db/rxtrace', SECRETS_KEY_FILE: '/run/secrets/rxtrace' })).toBeNull()
  })

  it('SECRETS_KEY with SECRETS_KEY_FILE, or SECRETS_KEY_PREVIOUS without SECRETS_KEY, is refused', () => {
    expect(refusal({ SECRETS_KEY: newKey(), SECRETS_KEY_FILE: '/run/secrets/rxtrace' })).toMatch(/SECRETS_KEY_FILE=.*not both/)
    expect(refusal({ SECRETS_KEY_PREVIOUS: newKey() })).toMatch(
      /^invalid configuration: SECRETS_KEY_PREVIOUS=\(hidden\): needs SECRETS_KEY/,
    )
  })

  it('SECRETS_KEY_FILE: the first line seals, later lines open; a bad line stops the start naming the file and line', async () => {
    const dir = dataDir()
    const [first, second] = [newKey(), newKey()]
    const file = join(dir, 'kek')
    writeFileSync(file, `# current first\n${second}\n${first}\n`, { mode: 0o600 })
    const before = await serviceOn(dir, { SECRETS_KEY: first })
    const { token } = await makeSecrets(before.api, 'http://127.0.0.1:9')
    await stop(before.api)
    const { api } = await serviceOn(dir, { SECRETS_KEY_FILE: file })
    expect((await api.get('/v1/pharmacies', token)).status).toBe(200)
    expect(api.service.secrets.keyIds).toHaveLength(2)
    await stop(api)

    writeFileSync(file, `${second}\nnot a key\n`)
    const refused = await buildService(loadConfig({ ...TEST_ENV, DATA_DIR: dir, SECRETS_KEY_FILE: file })).then(
      (service) => (void service.stop(), null),
      (error: Error) => error.message,
    )
    expect(refused).toBe(`SECRETS_KEY_FILE=${file}: line 2 is not a key (32 random bytes in base64, e.g. from \`openssl rand -base64 32\`)`)
  })
})
