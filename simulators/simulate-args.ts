import { parseArgs } from 'node:util'
import { parseDuration } from '../src/config.js'
import { isScenario, SCENARIOS, type ScenarioName } from './scenarios.js'

export type SimulateOptions = {
  totes: number
  scenario: ScenarioName
  url: string
  /** The broker named by --mqtt; null: the one the service names in GET /.well-known/rxtrace.json. */
  mqtt: string | null
  /** Register the deliveries at this pharmacy (the pharmacist's); null: a new simulated one. */
  pharmacy: string | null
  clientId: string
  clientSecret: string
  /** Wall-clock time between two readings of a tote. */
  rateMs: number
  /** How many times faster than real time the scenario plays (and the profile's durations shrink). */
  speed: number
  seed: number
  /** Stop by itself after this long; null runs until Ctrl-C. */
  forMs: number | null
}

// A simulation is a demo or a smoke test; thousands of totes is the load generator's job.
const MAX_TOTES = 1_000
// Faster than this, the scaled profile's durations drop below a second (the reorder window's grain).
const MAX_SPEED = 300

/** The options, or the one line that says what is wrong with them. */
export function parseSimulateArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): SimulateOptions | { error: string } {
  let values: Record<string, string | undefined>
  try {
    ;({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        // The service's HTTP address follows its PORT; the broker's is asked of the service itself
        // (a shell's MQTT_PORT may name another broker, and one on 1883 would accept everything).
        totes: { type: 'string' },
        scenario: { type: 'string' },
        url: { type: 'string', default: `http://localhost:${env.PORT || 8080}` },
        mqtt: { type: 'string' },
        pharmacy: { type: 'string' },
        'client-id': { type: 'string' },
        'client-secret': { type: 'string' },
        rate: { type: 'string', default: '1s' },
        speed: { type: 'string', default: '1' },
        seed: { type: 'string', default: '1' },
        for: { type: 'string' },
      },
    }) as { values: Record<string, string | undefined> })
  } catch (error) {
    return { error: (error as Error).message }
  }
  const totes = Number(values.totes)
  if (values.totes === undefined) return { error: '--totes is required' }
  if (!Number.isInteger(totes) || totes < 1 || totes > MAX_TOTES)
    return { error: `--totes must be a whole number from 1 to ${MAX_TOTES}, got ${values.totes}` }
  if (values.scenario === undefined) return { error: `--scenario is required (${SCENARIOS.join(', ')})` }
  if (!isScenario(values.scenario)) return { error: `--scenario must be one of ${SCENARIOS.join(', ')}, got ${values.scenario}` }
  if (!/^https?:\/\/[^/]+/.test(values.url!)) return { error: `--url must be an http(s) URL, got ${values.url}` }
  if (values.mqtt !== undefined && !/^(mqtts?|wss?):\/\/[^/]+/.test(values.mqtt))
    return { error: `--mqtt must be an mqtt:// or ws:// URL, got ${values.mqtt}` }
  if (values.pharmacy !== undefined && !/^ph_\w+$/.test(values.pharmacy))
    return { error: `--pharmacy must be a pharmacy id (ph_…), got ${values.pharmacy}` }
  const rateMs = duration(values.rate!)
  if (rateMs === null || rateMs < 100) return { error: `--rate must be a duration of at least 100ms such as 1s, got ${values.rate}` }
  const speed = Number(values.speed)
  if (!Number.isFinite(speed) || speed < 1 || speed > MAX_SPEED)
    return { error: `--speed must be a number from 1 to ${MAX_SPEED}, got ${values.speed}` }
  const seed = Number(values.seed)
  if (!Number.isInteger(seed)) return { error: `--seed must be a whole number, got ${values.seed}` }
  const forMs = values.for === undefined ? null : duration(values.for)
  if (forMs === 0 || (values.for !== undefined && forMs === null))
    return { error: `--for must be a duration such as 10m, got ${values.for}` }
  const clientId = values['client-id'] ?? env.ADMIN_CLIENT_ID
  const clientSecret = values['client-secret'] ?? env.ADMIN_CLIENT_SECRET
  if (!clientId || !clientSecret)
    return {
      error: 'no credentials: pass --client-id and --client-secret (printed by npm start), or set ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET',
    }
  return {
    totes,
    scenario: values.scenario,
    url: values.url!,
    mqtt: values.mqtt ?? null,
    pharmacy: values.pharmacy ?? null,
    clientId,
    clientSecret,
    rateMs,
    speed,
    seed,
    forMs,
  }
}

function duration(text: string): number | null {
  try {
    return parseDuration(text)
  } catch {
    return null
  }
}
