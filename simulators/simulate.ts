import { ApiClient } from './api-client.js'
import { EventWatcher, progressLine, StatusLine } from './progress.js'
import { findBroker, refusesStrangers } from './find-broker.js'
import { registerTrips } from './setup.js'
import { parseSimulateArgs, type SimulateOptions } from './simulate-args.js'
import { SimulatedTote } from './tote.js'
import { TripPlayer } from './trip-player.js'
import { eventLine } from './webhook-receiver.js'

/**
 * `npm run simulate -- --totes N --scenario …`: registers a pharmacy, a fleet, N totes and N
 * cold-chain prescriptions on a running service, dispatches each delivery with its tote, then
 * plays the scenario on every tote over MQTT until Ctrl-C (or `--for`). One status line on
 * stderr; the rule events of these deliveries are printed above it as they appear.
 */

const REDRAW_MS = 250
const EVENT_POLL_MS = 2_000
// Rule events worth a line of their own; delivery events are already in the status counts.
const NOTABLE = /^(temperature\.|cold-chain\.|sensor\.)/

async function simulate(opts: SimulateOptions): Promise<void> {
  const api = new ApiClient(opts.url, opts.clientId, opts.clientSecret)
  const status = new StatusLine()
  const deliveryIds = new Set<string>()
  const events = new EventWatcher(api, deliveryIds)
  status.update(`reaching the service at ${opts.url} …`)
  await events.poll().catch((error: Error) => {
    // also skips the service's earlier events
    throw new Error(unreachable('the service', opts.url, error, 'is it running (npm start)? --url names its HTTP address (PORT)'))
  })

  const mqtt = await findBroker(opts.url, opts.mqtt)

  status.update(`registering ${opts.totes} tote${opts.totes === 1 ? '' : 's'} and deliveries on ${opts.url} …`)
  const { trips, pharmacyId, pharmacyName } = await registerTrips(api, { totes: opts.totes, speed: opts.speed, pharmacyId: opts.pharmacy })
  for (const trip of trips) deliveryIds.add(trip.deliveryId)
  status.update(`checking the broker at ${mqtt} …`)
  if (!(await refusesStrangers(mqtt, trips[0]!.toteId)))
    throw new Error(
      `the broker at ${mqtt} accepted a wrong password for tote ${trips[0]!.toteId}: it is not the service's broker; drop --mqtt`,
    )
  status.log(`deliveries at pharmacy ${pharmacyId} (${pharmacyName}); totes publish to ${mqtt}`)
  for (const trip of trips) status.log(`  ${trip.deliveryId}  ${consoleLink(opts.url, trip.deliveryId)}`)
  status.update(`connecting ${trips.length} totes to ${mqtt} …`)
  const onRejected = (r: { error: string; reason: string }, toteId: string) =>
    status.log(`✗ ${toteId} payload refused: ${r.error}: ${r.reason}`)
  const totes = await Promise.all(
    trips.map((t) => SimulatedTote.connect(mqtt, { toteId: t.toteId, password: t.password }, onRejected)),
  ).catch((error: Error) => {
    throw new Error(unreachable("the service's MQTT broker", mqtt, error, 'GET /.well-known/rxtrace.json on the service names it'))
  })

  const stop = new AbortController()
  const players = trips.map(
    (t, i) =>
      new TripPlayer(totes[i]!, {
        scenario: opts.scenario,
        seed: opts.seed + t.index,
        startMs: t.startMs,
        rateMs: opts.rateMs,
        speed: opts.speed,
      }),
  )
  const playing = players.map((p) => p.play(stop.signal, (error) => status.log(`✗ publish failed: ${error.message}`)))
  const redraw = () =>
    status.update(
      progressLine(
        totes,
        players.reduce((n, p) => n + p.failures, 0),
        events,
      ),
      { redraw: true },
    )
  const pollEvents = async () => {
    for (const event of await events.poll()) if (NOTABLE.test(event.type)) status.log(eventLine(event))
  }
  const timers = [
    setInterval(redraw, REDRAW_MS),
    setInterval(() => void pollEvents().catch((error: Error) => status.log(`✗ polling events: ${error.message}`)), EVENT_POLL_MS),
  ]
  if (opts.forMs !== null) timers.push(setTimeout(() => stop.abort(), opts.forMs))
  status.log(
    `playing "${opts.scenario}" on ${trips.length} totes${opts.speed > 1 ? ` at ${opts.speed}× speed` : ''}, one reading per tote every ${opts.rateMs / 1000} s; Ctrl-C stops`,
  )
  if (opts.speed === 1) status.log('at real speed a scenario unfolds over minutes, as it would on the road; --speed 60 plays it 60× faster')

  const interrupted = new Promise<void>((resolve) => {
    const onSignal = () => {
      process.once('SIGINT', () => process.exit(130)) // a second Ctrl-C does not wait
      resolve()
    }
    process.once('SIGINT', onSignal)
    process.once('SIGTERM', onSignal)
    stop.signal.addEventListener('abort', () => resolve())
  })
  await interrupted
  stop.abort()
  await Promise.all(playing)
  for (const timer of timers) clearInterval(timer)
  await pollEvents().catch(() => {})
  redraw()
  status.end()
  await Promise.all(totes.map((t) => t.close()))
  // The console, not /temperature.svg: a link pasted in a browser carries no token.
  for (const trip of trips) console.error(`  ${trip.deliveryId}  ${consoleLink(opts.url, trip.deliveryId)}`)
}

/** The delivery in the pharmacist console (docs/console.md): its chart, custody and decisions, after sign-in. */
const consoleLink = (serviceUrl: string, deliveryId: string) => `${new URL('/console/', serviceUrl)}#/deliveries/${deliveryId}`

/** One line that names what could not be reached, where, why, and what to check. */
function unreachable(what: string, url: string, error: Error, check: string): string {
  const cause = (error.cause as Error | undefined)?.message ?? (error as Error & { code?: string }).code ?? error.message
  return `cannot reach ${what} at ${url}: ${cause || error.message}; ${check}`
}

const opts = parseSimulateArgs(process.argv.slice(2))
if ('error' in opts) {
  console.error(
    `simulate: ${opts.error} (usage: npm run simulate -- --totes N --scenario normal|door-open|compressor-failure|freeze|sensor-dropout)`,
  )
  process.exit(2)
}
simulate(opts).then(
  () => process.exit(0),
  (error: Error) => {
    console.error(`\nsimulate: ${error.message}`)
    process.exit(1)
  },
)
