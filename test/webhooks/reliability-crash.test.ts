import SqliteDatabase from 'better-sqlite3'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Webhook } from 'standardwebhooks'
import { afterAll, describe, expect, it } from 'vitest'
import { waitFor } from '../helpers/wait.js'

const repoRoot = fileURLToPath(new URL('../../', import.meta.url))
const ADMIN = { id: 'cl_crash_admin', secret: 'crash-test-admin-secret-0123456789' }
const EVENTS = 1_000
// Until the crash the receiver answers 503 with this Retry-After: every row stays pending and
// is retried at this pace while the prescriptions are created, with room in the schedule
// below (17 attempts ≥ 4 s apart) for a slow machine.
const RETRY_AFTER_S = 4
const RETRY_SCHEDULE = '200ms,200ms,500ms,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s'

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

/** The service exactly as `npm start` runs it, in its own process; `children` knows it at once, so nothing outlives the test. */
async function startService(env: NodeJS.ProcessEnv, baseUrl: string, children: ChildProcess[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: repoRoot, env, stdio: ['ignore', 'ignore', 'pipe'] })
  children.push(child)
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => void (stderr = (stderr + chunk.toString()).slice(-4_096)))
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}: ${stderr}`)
      return fetch(`${baseUrl}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
    },
    45_000, // as test/helpers/child-service.ts allows: a child's start takes far longer on a busy machine
    'the service to be ready',
  )
  return child
}

describe('a crash with webhooks pending (SPEC §7: events survive a crash)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-crash-'))
  const children: ChildProcess[] = []
  let receiver: Server | undefined
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    receiver?.closeAllConnections()
    await new Promise((resolve) => (receiver ? receiver.close(resolve) : resolve(undefined)))
    rmSync(dataDir, { recursive: true, force: true })
  })

  it(`SIGKILL with ${EVENTS} deliveries pending, restart: every event arrives at least once`, async () => {
    const [port, receiverPort] = await Promise.all([freePort(), freePort()])
    const baseUrl = `http://127.0.0.1:${port}`
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'test',
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      MQTT_PORT: '0',
      MQTT_WS_PORT: 'off',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE: RETRY_SCHEDULE,
      ADMIN_CLIENT_ID: ADMIN.id,
      ADMIN_CLIENT_SECRET: ADMIN.secret,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_RPS: '100000',
      RATE_LIMIT_BURST: '100000',
      REORDER_WINDOW_S: '0',
    }

    // The receiver: 503 until the crash, then 200; it keeps every request.
    let healthy = false
    const received: Array<{ headers: Record<string, string>; body: string }> = []
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        if (!healthy) return void res.writeHead(503, { 'retry-after': String(RETRY_AFTER_S) }).end()
        received.push({ headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString() })
        res.end('ok')
      })
    })
    await new Promise<void>((resolve) => receiver!.listen(receiverPort, '127.0.0.1', resolve))

    const first = await startService(env, baseUrl, children)
    const tokenRes = await fetch(`${baseUrl}/oauth/token`, {
      method: 'POST',
      body: 'grant_type=client_credentials',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${ADMIN.id}:${ADMIN.secret}`).toString('base64')}`,
      },
    })
    const token = ((await tokenRes.json()) as { access_token: string }).access_token
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(`${baseUrl}${path}`, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      })
      const json = (await res.json()) as Record<string, any>
      if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`)
      return json
    }
    const pharmacy = await post('/v1/pharmacies', {
      name: 'Crash Test Pharmacy',
      timezone: 'America/Chicago',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
    })
    const endpoint = await post('/v1/webhooks', {
      url: `http://127.0.0.1:${receiverPort}/hooks`,
      events: ['delivery.created'],
      pharmacy_id: pharmacy.id,
    })

    // 1,000 prescriptions, 20 at a time: 1,000 delivery.created events, answered 503 until the crash.
    let next = 0
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < EVENTS) {
          const i = next++
          await post(
            '/v1/prescriptions',
            { pharmacy_id: pharmacy.id, patient_id: `pt_${i}`, cold_chain: false },
            { 'idempotency-key': `crash-${i}` },
          )
        }
      }),
    )

    first.kill('SIGKILL')
    await new Promise((resolve) => first.once('exit', resolve))
    expect(first.signalCode).toBe('SIGKILL')
    expect(received).toHaveLength(0)

    // The store after the crash: every event's delivery still pending, none lost with the process.
    const store = new SqliteDatabase(join(dataDir, 'rxtrace.db'))
    const states = store.prepare(`select state, count(*) as n from webhook_messages where endpoint_id = ? group by state`).all(endpoint.id)
    expect(states).toEqual([{ state: 'pending', n: EVENTS }])
    const eventIds = new Set(
      (store.prepare(`select id from events where type = 'delivery.created'`).all() as Array<{ id: string }>).map((r) => r.id),
    )
    expect(eventIds.size).toBe(EVENTS)
    // Rows that were in flight at the kill are leased, and due again when the lease runs out
    // (2 × 10 s timeout + 60 s; a claim sets both times). Rather than wait 80 s, move those
    // leases into the past: the state the store will be in 80 s from now.
    const now = Date.now()
    store.prepare('update webhook_messages set lease_until = ?, next_attempt_at = ? where lease_until > ?').run(now - 1, now - 1, now)
    store.close()

    healthy = true
    await startService(env, baseUrl, children)
    await waitFor(
      () => new Set(received.map((r) => r.headers['webhook-id'])).size === EVENTS,
      25_000,
      `all ${EVENTS} events at the receiver`,
    )

    const ids = new Set(received.map((r) => r.headers['webhook-id']))
    expect(ids).toEqual(eventIds) // none lost, none invented
    const verifier = new Webhook(endpoint.secret)
    for (const r of received.slice(0, 50)) expect(verifier.verify(r.body, r.headers)).toMatchObject({ type: 'delivery.created' })
  }, 120_000)
})
