import { randomBytes } from 'node:crypto'
import mqtt, { type MqttClient } from 'mqtt'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { mosquittoAvailable, startMosquitto, type Mosquitto } from '../helpers/mosquitto.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { reachablePostgres } from '../helpers/stores.js'
import { waitFor } from '../helpers/wait.js'

/**
 * `MQTT_URL` across broker outages and across copies (docs/deployment.md): a tote registered
 * while the broker is down gets its account once it is back; two copies on one PostgreSQL share
 * the subscription and store each reading once.
 */

const readings = (toteId: string) => `rxtrace/v1/totes/${toteId}/readings`
const connectTote = (broker: Mosquitto, tote: { id: string; mqtt: { password: string } }): Promise<MqttClient> =>
  mqtt.connectAsync(`mqtt://127.0.0.1:${broker.port}`, {
    protocolVersion: 5,
    clientId: tote.id,
    username: tote.id,
    password: tote.mqtt.password,
    reconnectPeriod: 0,
  })

const cleanups: (() => Promise<unknown>)[] = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined)
})

describe.skipIf(!mosquittoAvailable())('tote accounts when the broker is down', () => {
  /** A Mosquitto of its own and one copy of the service behind it, with a pharmacy. */
  async function serviceBehindBroker(clientId: string) {
    const broker = await startMosquitto()
    cleanups.push(() => broker.dispose())
    const api = await startTestService({
      MQTT_URL: broker.serviceUrl,
      MQTT_PORT: '',
      MQTT_CLIENT_ID: clientId,
      MQTT_INGEST_CONNECTIONS: '1',
    })
    cleanups.push(() => api.stop())
    await api.service.start()
    const admin = await api.adminToken()
    return { broker, api, admin, pharmacyId: (await api.pharmacy(admin)).id as string }
  }

  /** The tote connects with its credentials and role, and a reading it publishes is stored. */
  async function publishesAndIsStored(broker: Mosquitto, api: TestApi, tote: { id: string; mqtt: { password: string } }) {
    const client = await connectTote(broker, tote)
    const ts = Date.now()
    await client.publishAsync(readings(tote.id), JSON.stringify({ ts, temp_c: 5 }), { qos: 1 })
    await waitFor(async () => (await api.service.sink.readingsForTote(tote.id, ts, ts + 1)).length === 1, 20_000, 'the reading stored')
    await client.endAsync()
  }

  it('registers the tote anyway, and gives the broker its account once the broker is back', async () => {
    const { broker, api, admin, pharmacyId } = await serviceBehindBroker('rx_outage')

    await broker.stop()
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId }) // 201 with its credentials
    expect(await api.service.accounts!.pending()).toBe(1)
    const row = await api.service.db.selectFrom('broker_accounts').selectAll().executeTakeFirstOrThrow()
    expect(row.sealed_password).not.toContain(tote.mqtt.password) // sealed, not kept in the clear

    await broker.restart() // a fresh broker: its dynamic-security file does not have the tote
    await waitFor(async () => (await api.service.accounts!.pending()) === 0, 30_000, 'the account to reach the broker')
    // The ingest worker reconnected and subscribed again (the restarted broker had lost its session).
    await publishesAndIsStored(broker, api, tote)
  }, 60_000)

  it('settles an account the broker created although its answer was lost (the broker went down mid-command)', async () => {
    const { broker, api, admin, pharmacyId } = await serviceBehindBroker('rx_lost')

    // Registered while the broker is stopping: the commands leave before the service sees the
    // connection close, and reach the broker (again after the reconnect) while their answer does
    // not reach the service. A retry then finds the role and the client already there.
    const stopping = broker.stop()
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    await stopping
    await broker.restart()
    await waitFor(async () => (await api.service.accounts!.pending()) === 0, 40_000, 'the account to be settled')
    await publishesAndIsStored(broker, api, tote) // with this password and the tote's role
  }, 90_000)
})

const postgres = await reachablePostgres()

describe.skipIf(!mosquittoAvailable() || postgres.url === null)('two copies on one PostgreSQL sharing the subscription', () => {
  it('store every reading exactly once between them', async () => {
    const url = postgres.url!
    const schema = `rx_test_${randomBytes(6).toString('hex')}`
    cleanups.push(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      await client.query(`drop schema if exists "${schema}" cascade`)
      await client.end()
    })
    const broker = await startMosquitto()
    cleanups.push(() => broker.dispose())
    const copies: TestApi[] = []
    for (const name of ['a', 'b']) {
      const copy = await startTestService(
        { MQTT_URL: broker.serviceUrl, MQTT_PORT: '', MQTT_CLIENT_ID: `rx_copy_${name}`, MQTT_INGEST_CONNECTIONS: '2' },
        { store: { kind: 'postgres', url, schema } },
      )
      cleanups.push(() => copy.stop())
      await copy.service.start()
      copies.push(copy)
    }
    const [a, b] = copies as [TestApi, TestApi]
    const admin = await a.adminToken()
    const pharmacy = await a.pharmacy(admin)
    const tote = await b.tote(admin, { pharmacy_id: pharmacy.id }) // registered through the other copy

    const client = await connectTote(broker, tote)
    const count = 400
    const first = Date.now() - count * 100
    await Promise.all(
      Array.from({ length: count }, (_, i) =>
        client.publishAsync(readings(tote.id), JSON.stringify({ ts: first + i * 100, temp_c: 5 }), { qos: 1 }),
      ),
    )
    await client.endAsync()

    const stored = async () => {
      const rows = await Promise.all([a, b].map((copy) => copy.service.sink.readingsForTote(tote.id, first, first + count * 100)))
      return rows.map((r) => r.map((row) => row.ts))
    }
    await waitFor(async () => new Set((await stored()).flat()).size === count, 20_000, `all ${count} readings stored`)
    const [inA, inB] = (await stored()) as [number[], number[]]
    expect(inA.length + inB.length).toBe(count) // none stored twice
    expect(inA.length).toBeGreaterThan(0) // the subscription is shared: each copy took some
    expect(inB.length).toBeGreaterThan(0)

    // A copy stopped gracefully leaves the subscription: the other copy takes every reading from
    // then on (none waits in the stopped copy's session for it to come back).
    await b.stop()
    const later = await connectTote(broker, tote)
    const next = first + count * 100
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        later.publishAsync(readings(tote.id), JSON.stringify({ ts: next + i * 100, temp_c: 5 }), { qos: 1 }),
      ),
    )
    await later.endAsync()
    await waitFor(
      async () => (await a.service.sink.readingsForTote(tote.id, next, next + 50 * 100)).length === 50,
      20_000,
      'all 50 later readings stored by the copy still running',
    )
  }, 60_000)
})
