import mqtt from 'mqtt'
import { describe, expect, it } from 'vitest'
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
    expect(Date.now() - started).toBeLessThan(5_000) // one after the other, it would take 8 s
    await sink.close()
  }, 30_000)

  it('gives the tote no PUBACK and closes its connection, so it sends the reading again later', async () => {
    const { fake, sink } = await questdbThatGoesDown(1_000)
    const api = await startTestService({}, { sink })
    const { mqttPort } = await api.service.start()
    try {
      const admin = await api.adminToken()
      const tote = await api.tote(admin, { pharmacy_id: (await api.pharmacy(admin)).id })
      const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { username: tote.mqtt.username, password: tote.mqtt.password, clientId: tote.id, reconnectPeriod: 0 })
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
