import mqtt, { type MqttClient } from 'mqtt'
import type { Logger } from 'pino'
import { rootCause, StartupError, withoutPassword } from '../startup-error.js'
import type { BrokerAccounts } from './broker-accounts.js'
import type { BrokerAddress } from './broker-url.js'
import { DynamicSecurity } from './dynsec.js'
import { IngestWorker, type IngestWorkerOptions } from './ingest-worker.js'

// MQTT 5 CONNACK reason codes (§3.2.2.2) that mean "these credentials": 0x86 bad user name or password, 0x87 not authorized.
const BAD_CREDENTIALS = new Set([0x86, 0x87])
// Tote accounts the broker has not got yet (it was down, or refused) are tried again this often.
const PROVISION_EVERY_MS = 5_000

export type ExternalBrokerOptions = Omit<IngestWorkerOptions, 'broker'> & {
  mqttUrl: string
  broker: BrokerAddress
  /** Null with `MQTT_PROVISIONING=off`: the operator gives the broker the tote accounts. */
  accounts: BrokerAccounts | null
  logger: Logger
}

export type ExternalBroker = {
  port: number
  publishError(toteId: string, reason: object): void
  close(): Promise<void>
}

/**
 * `MQTT_URL` mode (docs/deployment.md): checks the broker at start-up (reachable, these
 * credentials, the dynamic-security plugin when provisioning), then joins it as an ingest worker
 * and hands it tote accounts. Each way start-up can fail is one StartupError line naming MQTT_URL.
 */
export async function joinExternalBroker(options: ExternalBrokerOptions): Promise<ExternalBroker> {
  const { mqttUrl, broker, accounts, logger } = options
  const fail = (reason: string, error?: unknown) => new StartupError(`MQTT_URL=${withoutPassword(mqttUrl)}: ${reason}`, { cause: error })

  let control: MqttClient | null = null
  let dynsec: DynamicSecurity | null = null
  if (accounts) {
    control = await connectControl(options).catch((error: unknown) => {
      throw credentialsRefused(error)
        ? fail(`the MQTT broker refused this user name and password (${rootCause(error)}); check the user in MQTT_URL`, error)
        : fail(
            `cannot reach the MQTT broker: ${rootCause(error)}; check that it is running and reachable from here, or unset MQTT_URL`,
            error,
          )
    })
    try {
      dynsec = await DynamicSecurity.over(control)
      await dynsec.check(broker.username)
    } catch (error) {
      await control.endAsync(true).catch(() => undefined)
      throw fail(
        `the broker's dynamic-security plugin does not answer this user (${(error as Error).message}); load Mosquitto's dynamic-security plugin and give ${broker.username} its admin role, or set MQTT_PROVISIONING=off to give the broker tote accounts yourself`,
        error,
      )
    }
    control.options.reconnectPeriod = 1_000
    control.on('error', (err) => logger.warn({ err: err.message }, 'MQTT control connection error'))
    accounts.attach(dynsec)
  }

  let worker: IngestWorker
  try {
    worker = await IngestWorker.start(options)
  } catch (error) {
    accounts?.attach(null)
    dynsec?.close()
    await control?.endAsync(true).catch(() => undefined)
    if (error instanceof StartupError) throw error
    throw credentialsRefused(error)
      ? fail(`the MQTT broker refused this user name and password (${rootCause(error)}); check the user in MQTT_URL`, error)
      : fail(`cannot join the MQTT broker as an ingest worker: ${rootCause(error)}`, error)
  }
  logger.info(
    { broker: broker.url, clientId: options.clientId, connections: options.connections, provisioning: accounts ? 'dynsec' : 'off' },
    'ingest worker joined the external MQTT broker',
  )

  let timer: NodeJS.Timeout | null = null
  if (accounts) {
    const pass = () => void accounts.provisionDue().catch((err) => logger.warn({ err }, 'tote account pass failed'))
    pass() // accounts left over from a time the broker was down
    timer = setInterval(pass, PROVISION_EVERY_MS)
    timer.unref()
  }

  return {
    port: broker.port,
    publishError: (toteId, reason) => worker.publishError(toteId, reason),
    async close() {
      if (timer) clearInterval(timer)
      accounts?.attach(null)
      await worker.close()
      dynsec?.close()
      await control?.endAsync().catch(() => undefined)
    },
  }
}

function connectControl({ broker, clientId }: ExternalBrokerOptions): Promise<MqttClient> {
  return mqtt.connectAsync(broker.url, {
    protocolVersion: 5,
    clientId: `${clientId}_control`,
    username: broker.username,
    password: broker.password,
    clean: true,
    reconnectPeriod: 0, // start-up: one attempt, one clear line; reconnecting is switched on after
    connectTimeout: 10_000,
  })
}

function credentialsRefused(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'number' && BAD_CREDENTIALS.has(code)
}
