import mqtt from 'mqtt'
import { describe, expect, it, vi } from 'vitest'
import { createQuestdbSink } from '../../src/timeseries/questdb-sink.js'
import { FakeQuestdb } from '../helpers/fake-questdb.js'
import { startTestService } from '../helpers/service.js'
import { reading } from '../timeseries/sink-contract.js'

// QuestDB down: its port closed, every connection refused. The config strings name no transport
// and no retry_timeout, so the client's defaults are in play (today they retry a refused
// connection forever, and these tests time out).

/** A sink made while QuestDB is up, and the stand-in to take down. */
async function questdbThatGoesDown(deadlineMs: number) {
  const fake = new FakeQuestdb()
  const addr = await fake.start()
  const sink = await createQuestdbSink({ config: `http::addr=${addr};protocol_version=1;`, retry: { deadlineMs } })
  return { fake, sink }
}

describe('QuestDB refusing connections', () => {
  it('fails a write within the sink’s deadline', async () => {
    const { fake, sink } = await questdbThatGoesDown(1_000)
    await sink.write([reading({ seq: 1, ts: Date.UTC(2025, 0, 1) })]) // up: stored
    await fake.stop()
    await expect(sink.write([reading({ seq: 2, ts: Date.UTC(2025, 0, 1, 0, 0, 1) })])).rejects.toThrow(/QuestDB did not store 1 readings/)
    await sink.close()
  }, 20_000)

  it('settles a queue of writes within one deadline of their arrival, not one deadline each', async () => {
    const { fake, sink } = await questdbThatGoesDown(2_000)
    await fake.stop()
    const started = Date.now()
    const writes = [1, 2, 3, 4].map((seq) => sink.write([reading({ seq, ts: Date.UTC(2025, 0, 1, 0, 0, seq) })]))
    // Several are in flight at once: each is awaited together, so none is left unobserved when it fails.
    await Promise.all(writes.map((write) => expect(write).rejects.toThrow(/QuestDB did not store 1 readings/)))
    expect(Date.now() - started).toBeLessThan(7_000) // one after the other, it would take 8 s
    await sink.close()
  }, 30_000)

  it('gives the tote no PUBACK and closes its connection, so it sends the reading again later', async () => {
    const { fake, sink } = await questdbThatGoesDown(1_000)
    const api = await startTestService({}, { sink })
    const { mqttPort } = await api.service.start()
    try {
      const admin = await api.adminToken()
      const tote = await api.tote(admin, { pharmacy_id: (await api.pharmacy(admin)).id })
      const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
        username: tote.mqtt.username,
        password: tote.mqtt.password,
        clientId: tote.id,
        reconnectPeriod: 0,
      })
      client.on('error', () => {})
      await fake.stop()

      const closed = new Promise<void>((resolve) => client.once('close', () => resolve()))
      let acknowledged = false
      client.publish(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify({ ts: Date.now(), temp_c: 4.5 }), { qos: 1 }, (err) => {
        if (!err) acknowledged = true
      })
      await closed
      expect(acknowledged).toBe(false)
      client.end(true)
    } finally {
      await api.stop()
    }
  }, 20_000)
})

// QuestDB down for 20 s (an operator's restart) with several flushes in flight (the sink keeps up
// to four requests going), the sink on its default 5 s deadline: each publish must fail within
// it, so a tote's connection is closed several times while QuestDB is still down.
const OUTAGE_MS = 20_000
const TOTES = 4
const READINGS_PER_TOTE = 400

describe('QuestDB down for a while with several flushes in flight', () => {
  it('acknowledges no reading it has not stored, fails publishes within the outage, and resumes by itself', async () => {
    const fake = new FakeQuestdb()
    const addr = await fake.start()
    fake.answerDelayMs = 50 // QuestDB's commit: keeps several requests in flight
    const sink = await createQuestdbSink({ config: `http::addr=${addr};protocol_version=1;` })
    const api = await startTestService({}, { sink })
    const { mqttPort } = await api.service.start()
    const clients: mqtt.MqttClient[] = []
    try {
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      const totes = await Promise.all(Array.from({ length: TOTES }, () => api.tote(admin, { pharmacy_id: pharmacy.id })))
      const start = Date.now() - 60_000
      let down = false
      const closesWhileDown = new Map(totes.map((tote) => [tote.id, 0]))
      const unstoredAcks: string[] = []

      // Each tote streams its readings with up to 8 unacknowledged; when the service closes its
      // connection (a failed write), it reconnects and sends every unacknowledged reading again,
      // as a QoS 1 client does.
      const stream = async (tote: (typeof totes)[number]) => {
        const acked = new Array<boolean>(READINGS_PER_TOTE).fill(false)
        const topic = `rxtrace/v1/totes/${tote.id}/readings`
        while (acked.includes(false)) {
          const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
            username: tote.mqtt.username,
            password: tote.mqtt.password,
            clientId: tote.id,
            reconnectPeriod: 0,
          })
          clients.push(client)
          client.on('error', () => {})
          await new Promise<void>((resolve) => {
            let open = true
            let next = 0
            let inFlight = 0
            client.once('close', () => {
              open = false
              if (down) closesWhileDown.set(tote.id, closesWhileDown.get(tote.id)! + 1)
              resolve()
            })
            const pump = () => {
              while (open && inFlight < 8) {
                while (next < READINGS_PER_TOTE && acked[next]) next++
                if (next >= READINGS_PER_TOTE) {
                  if (inFlight === 0) client.end(false, {}, () => resolve())
                  return
                }
                const i = next++
                const ts = start + i * 100
                inFlight++
                client.publish(topic, JSON.stringify({ ts, temp_c: 5, seq: i }), { qos: 1 }, (err) => {
                  inFlight--
                  if (!err && open) {
                    if (!fake.has(tote.id, ts)) unstoredAcks.push(`${tote.id} ${i}`)
                    acked[i] = true
                  }
                  pump()
                })
              }
            }
            pump()
          })
        }
      }
      const streams = Promise.all(totes.map(stream))

      // Down once several flushes are in flight.
      await vi.waitFor(() => expect(fake.writesInFlight).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 1 })
      down = true
      await fake.refuseFor(OUTAGE_MS)
      down = false
      // Every tote's publishes failed (no PUBACK, connection closed) at least twice while QuestDB
      // was down, after reconnecting too: each failed within its deadline, none waited for QuestDB.
      expect(Math.min(...closesWhileDown.values())).toBeGreaterThanOrEqual(2)
      await streams

      expect(unstoredAcks).toEqual([])
      // Every reading stored once (the table's dedup key), nothing missing.
      for (const tote of totes) for (let i = 0; i < READINGS_PER_TOTE; i++) expect(fake.has(tote.id, start + i * 100)).toBe(true)
      expect(fake.rows.size).toBe(TOTES * READINGS_PER_TOTE)
      expect(await api.service.sink.count()).toBe(TOTES * READINGS_PER_TOTE)
    } finally {
      for (const client of clients) client.end(true)
      await api.stop()
      await fake.stop().catch(() => {})
    }
  }, 90_000)
})
