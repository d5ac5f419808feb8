import { randomBytes } from 'node:crypto'
import mqtt from 'mqtt'
import pg from 'pg'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'
import { mosquittoAvailable, startMosquitto, type Mosquitto } from '../helpers/mosquitto.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'
import { waitFor } from '../helpers/wait.js'

/**
 * A copy dies with readings queued for it (docs/deployment.md, Several copies on one
 * PostgreSQL): two copies share the readings subscription on a real Mosquitto; one is
 * SIGKILLed and stays dead while a tote publishes. The broker keeps handing the dead copy's
 * persistent session its share; the survivor adopts that session once its lease runs out and
 * stores every reading the broker acknowledged, without the dead copy coming back.
 */
const READINGS = 40

const { url, reasons } = await reachablePostgres()
if (!url) console.warn(`Skipping the session adoption suite: ${reasons.join('; ')}`)
const schemas = postgresSchemas(url ?? 'postgres://unreachable')
const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined)
})
afterAll(() => schemas.drop())

describe.skipIf(!url || !mosquittoAvailable())('a copy dies with readings queued in its MQTT session', () => {
  it('the surviving copy adopts the session and stores every acknowledged reading', async () => {
    const schema = await schemas.create()
    const databaseUrl = `${url}?options=${encodeURIComponent(`-c search_path=${schema}`)}`
    const broker: Mosquitto = await startMosquitto()
    cleanups.push(() => broker.dispose())
    const secretsKey = randomBytes(32).toString('base64') // copies on one database share its key-encryption key
    const copy = async (name: string): Promise<ChildService> => {
      const svc = await startChildService({
        env: {
          MQTT_URL: broker.serviceUrl,
          MQTT_PORT: '',
          DATABASE_URL: databaseUrl,
          SECRETS_KEY: secretsKey,
          MQTT_CLIENT_ID: `rx_adopt_${name}`,
          MQTT_INGEST_CONNECTIONS: '1',
        },
      })
      cleanups.push(() => svc.dispose())
      return svc
    }
    const dying = await copy('dying')
    const survivor = await copy('survivor')

    const token = await survivor.adminToken()
    const pharmacy = await survivor.post<{ id: string }>('/v1/pharmacies', token, {
      name: 'Adoption Pharmacy',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    expect(pharmacy.status, pharmacy.text).toBe(201)
    const tote = await survivor.post<{ id: string; mqtt: { password: string } }>('/v1/totes', token, {
      serial: `ADOPT-${Date.now()}`,
      pharmacy_id: pharmacy.body.id,
    })
    expect(tote.status, tote.text).toBe(201)

    expect(await dying.kill('SIGKILL')).toMatchObject({ signal: 'SIGKILL' })
    const killedAt = Date.now()

    // The tote's account reaches the broker a moment after the tote is registered.
    let client: mqtt.MqttClient | null = null
    await waitFor(
      async () => {
        client = await mqtt
          .connectAsync(`mqtt://127.0.0.1:${broker.port}`, {
            protocolVersion: 5,
            clientId: tote.body.id,
            username: tote.body.id,
            password: tote.body.mqtt.password,
            reconnectPeriod: 0,
          })
          .catch(() => null)
        return client !== null
      },
      30_000,
      'the tote to connect to the broker',
    )
    const tote_ = client! as mqtt.MqttClient
    cleanups.push(() => tote_.endAsync(true))
    const first = Date.now() - READINGS * 1_000
    // Every publish is acknowledged by the broker: half of them it queues in the dead copy's session.
    for (let i = 0; i < READINGS; i++) {
      await tote_.publishAsync(`rxtrace/v1/totes/${tote.body.id}/readings`, JSON.stringify({ ts: first + i * 1_000, temp_c: 5 }), {
        qos: 1,
      })
    }

    const reader = new pg.Client({ connectionString: url!, options: `-c search_path=${schema}` })
    await reader.connect()
    cleanups.push(() => reader.end())
    const stored = async () =>
      Number((await reader.query('select count(*) as n from readings where tote_id = $1', [tote.body.id])).rows[0].n)
    await waitFor(async () => (await stored()) === READINGS, 90_000, `all ${READINGS} readings stored`).catch(async (error: Error) => {
      throw new Error(`${error.message}: stored ${await stored()}\n${broker.log.slice(-2_000)}`)
    })
    console.info(`every reading stored ${Date.now() - killedAt} ms after SIGKILL`) // the adoption delay (docs/deployment.md)
    // The dead copy's session is gone from the broker's bookkeeping and ours: nothing is left to adopt.
    await waitFor(
      async () => (await reader.query("select 1 from ingest_sessions where client_id like 'rx_adopt_dying%'")).rows.length === 0,
      30_000,
      'the adopted session to be removed',
    )
  }, 180_000)
})
