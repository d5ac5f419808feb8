import { mkdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { ApiClient } from './api-client.js'
import { DEMO_ADMIN, startDemoService, type DemoService } from './demo-service.js'
import { CourierApp, refusal, type DeliveryView } from './driver.js'
import { Pharmacist } from './pharmacist.js'
import type { ScenarioName } from './scenarios.js'
import { registerTrips, type Trip } from './setup.js'
import { SimulatedTote } from './tote.js'
import { TripPlayer } from './trip-player.js'
import { eventLine, startWebhookReceiver, type WebhookEvent, type WebhookReceiver } from './webhook-receiver.js'

/**
 * `npm run demo`: the whole story in about a minute. The service starts in-process; a webhook
 * receiver verifies and prints every event; three totes ride three refrigerated deliveries
 * (normal, door-open, compressor-failure) at 120× speed; a courier picks them up, hands them
 * to a second driver and delivers — except the broken one, which the service holds until a
 * pharmacist decides to take it back.
 */

// 120×: each half-second reading is one minute of the trip; a 30-minute excursion breaks in 15 s.
const SPEED = 120
const RATE_MS = 500
// The compressor's tote breaks after ~30 s (failure, warming, 30 scaled minutes out of range, the 5 s reorder window).
const BREAK_TIMEOUT_MS = 90_000
const CAST: { scenario: ScenarioName; label: string }[] = [
  { scenario: 'normal', label: 'A (normal)' },
  { scenario: 'door-open', label: 'B (door opens at handoffs)' },
  { scenario: 'compressor-failure', label: 'C (compressor fails)' },
]

const started = Date.now()
// Ids are long; once introduced, the story calls them by name ("delivery A", "Dana").
const names = new Map<string, string>()
const named = (line: string) => line.replace(/\b(dl|dr|ph|tt)_[0-9a-z]{26}\b/g, (id) => names.get(id) ?? id)
const say = (who: string, line: string) =>
  console.log(`[+${((Date.now() - started) / 1_000).toFixed(1).padStart(5)}s] ${who.padEnd(8)} ${named(line)}`)

async function demo(stop: AbortSignal, cleanup: (step: () => Promise<unknown>) => void): Promise<void> {
  say('service', 'starting rxtrace in-process (SQLite in a temporary directory) …')
  const service: DemoService = await startDemoService()
  cleanup(() => service.stop())
  for (const note of service.notes) say('service', note)
  say('service', `HTTP ${service.baseUrl}  MQTT ${service.mqttUrl}  admin ${DEMO_ADMIN.clientId}`)

  const events: WebhookEvent[] = []
  const receiver: WebhookReceiver = await startWebhookReceiver({
    onEvent: (event) => (events.push(event), say('webhook', `✓ ${eventLine(event, { time: false })}`)),
    onRejected: (reason) => say('webhook', `✗ signature check failed: ${reason}`),
  })
  cleanup(() => receiver.close())
  const api = new ApiClient(service.baseUrl, DEMO_ADMIN.clientId, DEMO_ADMIN.clientSecret)
  const endpoint = await api.post<{ id: string; secret: string }>('/v1/webhooks', {
    url: receiver.url,
    events: ['*'],
    description: 'demo receiver',
  })
  receiver.setSecret(endpoint.secret)
  say('webhook', `receiver at ${receiver.url} registered for every event (${endpoint.id}); signatures verified with standardwebhooks`)

  const setup = await registerTrips(api, { totes: CAST.length, speed: SPEED, label: 'demo' })
  const [dana, sam] = setup.driverIds
  for (const trip of setup.trips) {
    say('pharmacy', `${trip.deliveryId} = delivery ${CAST[trip.index]!.label}: insulin, 2–8 °C, dispatched with tote ${trip.toteId}`)
    names.set(trip.deliveryId, `delivery ${'ABC'[trip.index]}`).set(trip.toteId, `tote ${'ABC'[trip.index]}`)
  }
  names.set(dana, 'Dana').set(sam, 'Sam').set(setup.pharmacyId, 'pharmacy')

  const totes = await Promise.all(
    setup.trips.map((t) =>
      SimulatedTote.connect(service.mqttUrl, { toteId: t.toteId, password: t.password }, (r, toteId) =>
        say('tote', `${toteId} was told on its errors topic: ${r.error} — ${r.reason}`),
      ),
    ),
  )
  cleanup(() => Promise.all(totes.map((t) => t.close())))
  const riding = setup.trips.map((trip) => ride(trip, totes[trip.index]!, stop))
  say('tote', `3 totes connected over MQTT, publishing a reading every ${RATE_MS} ms at QoS 1 (${SPEED}× speed)`)

  const apps = setup.trips.map((t) => new CourierApp(api, t.deliveryId, setup.pharmacyId))
  await sleep(3_000, undefined, { signal: stop })
  for (const app of apps) await app.pickup(dana)
  say('driver', 'Dana signed for all three at the pharmacy counter')

  await sleep(3_000, undefined, { signal: stop })
  say('tote', `${totes[1]!.toteId} glitches and sends 500 °C …`)
  await totes[1]!.publishRaw(JSON.stringify({ ts: new Date().toISOString(), temp_c: 500 }))

  await sleep(6_000, undefined, { signal: stop })
  for (const app of apps) await app.handoff(dana, sam)
  say('driver', 'Dana handed the three totes to Sam; both signatures are in the custody chain')

  await sleep(8_000, undefined, { signal: stop })
  for (const i of [0, 1]) {
    await apps[i]!.deliver()
    riding[i]!.abort()
    say('driver', `${apps[i]!.deliveryId} delivered: the patient read out their one-time code`)
  }

  say('driver', `${apps[2]!.deliveryId}: waiting for the cold-chain verdict on ${setup.trips[2]!.toteId} …`)
  await until(() => events.some((e) => e.type === 'cold-chain.break' && e.delivery_id === apps[2]!.deliveryId), BREAK_TIMEOUT_MS, stop)
  try {
    await apps[2]!.deliver()
    say('driver', `${apps[2]!.deliveryId} was delivered (the cold chain held)`)
  } catch (error) {
    say('driver', `${apps[2]!.deliveryId} deliver refused: ${refusal(error)} — the service holds a broken cold chain`)
    const pharmacist = await Pharmacist.register(api, setup.pharmacyId)
    const decided = await pharmacist.disposition(
      apps[2]!.deliveryId,
      'return',
      'Held above 8 °C for over 30 minutes; quarantine and replace.',
    )
    const signed = decided.custody.at(-1) as { signature?: { name: string; meaning: string; signed_at: string } }
    say(
      'pharmacy',
      `${pharmacist.name} reviewed the trace, decided: return, and signed it with their password (${signed.signature?.meaning} by ${signed.signature?.name} at ${signed.signature?.signed_at})`,
    )
    await apps[2]!.returnToPharmacy(sam)
    say('driver', `Sam brought ${apps[2]!.deliveryId} back to the pharmacy`)
  }
  riding[2]!.abort()

  await sleep(2_500, undefined, { signal: stop }) // the last webhooks
  await summary(api, apps)
}

/** Plays the trip's scenario on its tote until the returned controller aborts (or the demo stops). */
function ride(trip: Trip, tote: SimulatedTote, demoStop: AbortSignal): AbortController {
  const stop = new AbortController()
  demoStop.addEventListener('abort', () => stop.abort())
  const player = new TripPlayer(tote, {
    scenario: CAST[trip.index]!.scenario,
    seed: trip.index + 1,
    startMs: trip.startMs,
    rateMs: RATE_MS,
    speed: SPEED,
  })
  void player.play(stop.signal, (error) => say('tote', `${trip.toteId} publish failed: ${error.message}`))
  return stop
}

async function summary(api: ApiClient, apps: CourierApp[]): Promise<void> {
  const dir = join(tmpdir(), `rxtrace-demo-charts-${Date.now().toString(36)}`)
  mkdirSync(dir, { recursive: true })
  console.log('')
  for (const app of apps) {
    const d: DeliveryView = await app.read()
    const chain = await api.get<{ valid: boolean; length: number }>(`/v1/deliveries/${d.id}/custody/verify`)
    const cc = d.cold_chain
    const chart = join(dir, `${d.id}.svg`)
    // The trip lasted well under a minute of wall-clock time: one bucket per second.
    writeFileSync(chart, await api.text(`/v1/deliveries/${d.id}/temperature.svg?step=1s`))
    console.log(
      `${d.id} (${named(d.id).replace('delivery ', '')})  ${d.status.padEnd(9)} cold chain ${cc.state.padEnd(6)} ${cc.min_c ?? '–'}…${cc.max_c ?? '–'} °C  MKT ${cc.mkt_c ?? '–'} °C  ` +
        `${cc.excursions.length} excursion(s)${cc.break_reason ? `, broke: ${cc.break_reason}` : ''}  custody ${chain.valid ? 'valid' : 'BROKEN'} (${chain.length} events)`,
    )
  }
  console.log(`\ntemperature charts: ${dir}`)
}

async function until(check: () => boolean, timeoutMs: number, stop: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check() && Date.now() < deadline) await sleep(200, undefined, { signal: stop })
}

async function main(): Promise<void> {
  const stop = new AbortController()
  const steps: (() => Promise<unknown>)[] = []
  const cleanUp = async () => {
    stop.abort()
    for (const step of steps.reverse()) await step().catch(() => {})
  }
  process.once('SIGINT', () => {
    console.log('\nstopping …')
    void cleanUp().then(() => process.exit(0))
  })
  try {
    await demo(stop.signal, (step) => steps.push(step))
    await cleanUp()
    process.exit(0)
  } catch (error) {
    if (stop.signal.aborted) return // Ctrl-C: the handler above exits
    console.error(`demo: ${(error as Error).message}`)
    await cleanUp()
    process.exit(1)
  }
}

void main()
