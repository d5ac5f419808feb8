import { randomBytes } from 'node:crypto'
import mqtt from 'mqtt'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'
import { mosquittoAvailable, startMosquitto, type Mosquitto } from '../helpers/mosquitto.js'
import { reachablePostgres } from '../helpers/stores.js'
import { waitFor } from '../helpers/wait.js'
import { readingsTopicOf, type Tote } from './fixtures.js'

/**
 * SIGKILL of an ingest worker mid-stream (docs/deployment.md, Guarantees): two copies on one
 * PostgreSQL share the subscription on a real Mosquitto; a tote streams QoS 1 readings, one copy
 * is killed half-way and started again with the same client id. Every reading the broker
 * acknowledged to the tote is stored, and none twice: what the dead copy had not acknowledged
 * the broker sends again, to its resumed session.
 */

const READINGS = 3_000
/** QoS 1 publishes the tote keeps unacknowledged at once. */
const WINDOW = 64

const postgres = await reachablePostgres()
const cleanups: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined)
})

/**
 * A child service cannot be given a schema, so it gets a role of its own whose search_path is
 * a schema of its own (trust authentication, as on the test server); dropped afterwards.
 */
async function ownSchemaUrl(url: string): Promise<string> {
  const name = `rx_kill_${randomBytes(5).toString('hex')}`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`create role ${name} login`)
  await admin.query(`create schema ${name} authorization ${name}`)
  await admin.query(`alter role ${name} set search_path = ${name}`)
  await admin.end()
  cleanups.push(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query(`drop schema if exists ${name} cascade`)
    await client.query(`drop role if exists ${name}`)
    await client.end()
  })
  const target = new URL(url)
  target.username = name
  return target.toString()
}

describe.skipIf(!mosquittoAvailable() || postgres.url === null)('an ingest worker killed mid-stream', () => {
  it('loses no reading the broker accepted, and stores none twice', async () => {
    const databaseUrl = await ownSchemaUrl(postgres.url!)
    const broker: Mosquitto = await startMosquitto()
    cleanups.push(() => broker.dispose())
    const secretsKey = randomBytes(32).toString('base64') // one key-encryption key for every copy of the database
    const copy = async (name: string, dataDir?: string) => {
      const svc = await startChildService({
        ...(dataDir ? { dataDir } : {}),
        env: {
          MQTT_URL: broker.serviceUrl,
          MQTT_PORT: '',
          DATABASE_URL: databaseUrl,
          SECRETS_KEY: secretsKey,
          MQTT_CLIENT_ID: `rx_kill_${name}`,
          MQTT_INGEST_CONNECTIONS: '2',
        },
      })
      cleanups.push(() => svc.dispose())
      return svc
    }
    const a: ChildService = await copy('a')
    await copy('b')

    const token = await a.adminToken()
    const pharmacy = await a.post<{ id: string }>('/v1/pharmacies', token, {
      name: 'Kill Pharmacy',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    const tote = (await a.post<Tote>('/v1/totes', token, { serial: `KILL-${Date.now()}`, pharmacy_id: pharmacy.body.id })).body
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${broker.port}`, {
      protocolVersion: 5,
      clientId: tote.id,
      username: tote.id,
      password: tote.mqtt.password,
      reconnectPeriod: 0,
    })

    const first = Date.now() - READINGS * 50
    const tsOf = (i: number) => first + i * 50
    let acked = 0
    let next = 0
    let killed: Promise<unknown> | null = null
    // A window of QoS 1 publishes; half-way, copy A is SIGKILLed while the stream goes on.
    await new Promise<void>((resolve, reject) => {
      const send = () => {
        while (next < READINGS && next - acked < WINDOW) {
          const i = next++
          client.publish(readingsTopicOf(tote.id), JSON.stringify({ ts: tsOf(i), temp_c: 5 }), { qos: 1 }, (err) => {
            if (err) return reject(err)
            acked++
            if (acked === READINGS / 2) killed = a.kill('SIGKILL')
            if (acked === READINGS) resolve()
            else send()
          })
        }
      }
      send()
    })
    await client.endAsync()
    expect(await killed).toMatchObject({ signal: 'SIGKILL' })

    // A's session waits on the broker with what A had not acknowledged; A comes back under the same client id.
    await copy('a', a.dataDir)
    // Both copies write the one readings table of their PostgreSQL schema (its key is (tote_id, ts)).
    const reader = new pg.Client({ connectionString: databaseUrl })
    await reader.connect()
    cleanups.push(() => reader.end())
    const stored = async () => {
      const { rows } = await reader.query<{ ts: string }>('select ts from readings where tote_id = $1', [tote.id])
      return rows.map((row) => Number(row.ts))
    }
    await waitFor(async () => (await stored()).length === READINGS, 60_000, `all ${READINGS} readings stored`).catch(
      async (error: Error) => {
        const have = new Set(await stored())
        const missing = Array.from({ length: READINGS }, (_, i) => i).filter((i) => !have.has(tsOf(i)))
        throw new Error(
          `${error.message}: stored ${have.size}; missing ${missing.length}, e.g. #${missing.slice(0, 5).join(', #')}\n${broker.log.slice(-3_000)}`,
        )
      },
    )
    const rows = await stored()
    expect(new Set(rows).size).toBe(rows.length) // none stored twice
    const have = new Set(rows)
    for (let i = 0; i < READINGS; i++) expect(have.has(tsOf(i))).toBe(true)
  }, 300_000)
})
