import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiClient } from '../../simulators/api-client.js'
import { registerTrips } from '../../simulators/setup.js'
import { SimulatedTote, type Rejection } from '../../simulators/tote.js'
import { TripPlayer } from '../../simulators/trip-player.js'
import { ADMIN, startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

describe('a simulated tote on the running service (real HTTP and MQTT sockets)', () => {
  let api: TestApi
  let client: ApiClient
  let mqttUrl: string
  beforeAll(async () => {
    api = await startTestService()
    const ports = await api.service.start()
    client = new ApiClient(`http://127.0.0.1:${ports.httpPort}`, ADMIN.id, ADMIN.secret)
    mqttUrl = `mqtt://127.0.0.1:${ports.mqttPort}`
  })
  afterAll(() => api.stop())

  it('registers a dispatched cold-chain trip, plays its scenario at QoS 1 and hears about a refused payload', async () => {
    const { trips } = await registerTrips(client, { totes: 1, speed: 60, label: 'tote-test' })
    const trip = trips[0]!
    const delivery = await client.get(`/v1/deliveries/${trip.deliveryId}`)
    expect(delivery).toMatchObject({
      status: 'DISPATCHED',
      tote_id: trip.toteId,
      cold_chain: { profile: { name: 'refrigerated-x60', grace_s: 5, max_excursion_s: 30 } },
    })

    const rejections: Rejection[] = []
    const tote = await SimulatedTote.connect(mqttUrl, { toteId: trip.toteId, password: trip.password }, (r) => rejections.push(r))
    const stop = new AbortController()
    const playing = new TripPlayer(tote, { scenario: 'normal', seed: 1, startMs: trip.startMs, rateMs: 100, speed: 60 }).play(stop.signal)
    await waitFor(() => tote.stats.acked >= 5, 5_000, 'five acknowledged readings')
    stop.abort()
    await playing
    expect(tote.stats.acked).toBe(tote.stats.sent) // every PUBACK came back

    const trace = await client.get(`/v1/deliveries/${trip.deliveryId}/temperature?step=1s`)
    expect(trace.points.reduce((n: number, p: { n: number }) => n + p.n, 0)).toBe(tote.stats.acked)

    await tote.publishRaw(JSON.stringify({ ts: new Date().toISOString(), temp_c: 500 }))
    await waitFor(() => rejections.length === 1, 5_000, 'the rejection on the errors topic')
    expect(rejections[0]).toMatchObject({ error: 'temp_out_of_range' })
    expect(tote.stats.rejected).toBe(1)
    await tote.close()
  })

  it('refuses a tote with the wrong password', async () => {
    const { trips } = await registerTrips(client, { totes: 1, speed: 1, label: 'tote-test-2' })
    await expect(SimulatedTote.connect(mqttUrl, { toteId: trips[0]!.toteId, password: 'wrong' })).rejects.toThrow()
  })
})
