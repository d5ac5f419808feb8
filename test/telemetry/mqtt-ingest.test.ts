import mqtt from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

describe('a tote publishing over MQTT to the running service', () => {
  let api: TestApi
  let admin: string
  let mqttPort: number
  beforeAll(async () => {
    api = await startTestService()
    mqttPort = (await api.service.start()).mqttPort
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('stores a QoS 1 reading before the PUBACK, and refuses a bad one on the errors topic', async () => {
    const pharmacy = await api.pharmacy(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: tote.mqtt.username,
      password: tote.mqtt.password,
      clientId: tote.id,
      reconnectPeriod: 0,
    })
    const errors: string[] = []
    client.on('message', (_topic, payload) => errors.push(payload.toString()))
    await client.subscribeAsync(`rxtrace/v1/totes/${tote.id}/errors`, { qos: 1 })

    const before = await api.service.sink.count()
    await client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify({ ts: Date.now(), temp_c: 4.5 }), { qos: 1 })
    expect(await api.service.sink.count()).toBe(before + 1) // PUBACK came after the commit

    await client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, 'not json', { qos: 1 })
    await waitFor(() => errors.length === 1)
    expect(JSON.parse(errors[0]!)).toMatchObject({ error: 'invalid_json' })
    const metrics = await api.service.metrics.registry.getSingleMetricAsString('rxtrace_readings_rejected_total')
    expect(metrics).toContain('code="invalid_json"} 1')
    await client.endAsync()
  })

  it("shows a tote's MQTT password once, stores only a hash of it, and accepts it for CONNECT", async () => {
    const pharmacy = await api.pharmacy(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const { password } = tote.mqtt
    expect(password.length).toBeGreaterThanOrEqual(20)
    const shown = await api.get(`/v1/totes/${tote.id}`, admin)
    expect(shown.status).toBe(200)
    expect(shown.text).not.toContain(password)
    const listed = await api.get('/v1/totes?limit=100', admin)
    expect(listed.text).not.toContain(password)
    const row = await api.service.db.selectFrom('totes').selectAll().where('id', '=', tote.id).executeTakeFirstOrThrow()
    expect(JSON.stringify(row)).not.toContain(password)
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: tote.id,
      password,
      clientId: tote.id,
      reconnectPeriod: 0,
    })
    await client.endAsync()
  })

  it('refuses wrong credentials', async () => {
    const pharmacy = await api.pharmacy(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    await expect(
      mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { username: tote.id, password: 'wrong', clientId: tote.id, reconnectPeriod: 0 }),
    ).rejects.toThrow()
  })
})
