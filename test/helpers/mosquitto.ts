import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './child-service.js'

/**
 * A Mosquitto 2 of the test's own: a free port, its own config and dynamic-security file in a
 * temp dir, never the system broker on 1883. The config is the one docs/deployment.md shows.
 */

const DYNSEC_PLUGIN = '/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so'

/** The service's broker user: the dynsec admin role (from `mosquitto_ctrl dynsec init`) plus the ingest role. */
export const SERVICE_USER = { username: 'rxtrace', password: 'rxtrace-broker-secret-0123' }

/** The ingest role of docs/deployment.md: read every tote's readings on the shared subscription, write every tote's errors. */
const INGEST_ROLE = {
  rolename: 'rxtrace_ingest',
  acls: [
    { acltype: 'subscribePattern', topic: 'rxtrace/v1/totes/+/readings', allow: true },
    { acltype: 'publishClientReceive', topic: 'rxtrace/v1/totes/+/readings', allow: true },
    { acltype: 'publishClientSend', topic: 'rxtrace/v1/totes/+/errors', allow: true },
    { acltype: 'publishClientSend', topic: 'rxtrace/v1/totes/+/commands', allow: true },
  ],
}

export type MosquittoOptions = {
  /** Load the dynamic-security plugin (default true); false: a broker with only a password file for the service user. */
  dynsec?: boolean
  /** Reuse a port (a restart). */
  port?: number
}

export function mosquittoAvailable(): boolean {
  return spawnSync('mosquitto', ['-h']).error === undefined && spawnSync('mosquitto_ctrl', ['--help']).error === undefined
}

export async function startMosquitto(options: MosquittoOptions = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'rxtrace-mosquitto-'))
  const port = options.port ?? (await freePort())
  const dynsec = options.dynsec ?? true
  const lines = [
    `listener ${port} 127.0.0.1`,
    'allow_anonymous false',
    // Workers hold many unacknowledged messages at once (PUBACK after commit): no in-flight cap
    // per session, and nothing dropped from the queue of a worker that is away.
    'max_inflight_messages 0',
    'max_queued_messages 0',
    'persistence false',
    'log_type error',
    'log_type warning',
    'log_type notice',
    'log_type information', // connections, and the "running" line start-up waits for
    'log_dest stderr',
  ]
  if (dynsec) {
    const file = join(dir, 'dynamic-security.json')
    const init = spawnSync('mosquitto_ctrl', ['dynsec', 'init', file, SERVICE_USER.username, SERVICE_USER.password], { encoding: 'utf8' })
    if (init.status !== 0) throw new Error(`mosquitto_ctrl dynsec init failed: ${init.stderr}`)
    // The same as `mosquitto_ctrl … dynsec createRole rxtrace_ingest`, `addRoleACL …` and `addClientRole rxtrace rxtrace_ingest`.
    const config = JSON.parse(readFileSync(file, 'utf8'))
    config.roles.push(INGEST_ROLE)
    config.clients.find((c: { username: string }) => c.username === SERVICE_USER.username).roles.push({ rolename: INGEST_ROLE.rolename })
    writeFileSync(file, JSON.stringify(config, null, 2))
    lines.push(`plugin ${DYNSEC_PLUGIN}`, `plugin_opt_config_file ${file}`)
  } else {
    const passwords = join(dir, 'passwords')
    writeFileSync(passwords, '')
    const made = spawnSync('mosquitto_passwd', ['-b', passwords, SERVICE_USER.username, SERVICE_USER.password], { encoding: 'utf8' })
    if (made.status !== 0) throw new Error(`mosquitto_passwd failed: ${made.stderr}`)
    lines.push(`password_file ${passwords}`)
  }
  // Started as root, Mosquitto would switch to the `mosquitto` user, who cannot read this temp dir.
  if (process.getuid?.() === 0) lines.push('user root')
  const configFile = join(dir, 'mosquitto.conf')
  writeFileSync(configFile, lines.join('\n') + '\n')

  let log = ''
  const run = async () => {
    log += '--- start ---\n'
    const child: ChildProcess = spawn('mosquitto', ['-c', configFile], { stdio: ['ignore', 'ignore', 'pipe'] })
    child.stderr!.on('data', (chunk: Buffer) => void (log = (log + chunk.toString()).slice(-65_536)))
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    running.add(child)
    void exited.then(() => running.delete(child))
    await untilRunning(child, () => log.slice(log.lastIndexOf('--- start ---'))) // this start's lines only
    return { child, exited }
  }
  let current = await run()
  const stop = async () => {
    if (current.child.exitCode === null && current.child.signalCode === null) current.child.kill('SIGTERM')
    await current.exited
  }

  const url = (username: string, password: string) =>
    `mqtt://${encodeURIComponent(username)}:${encodeURIComponent(password)}@127.0.0.1:${port}`
  return {
    port,
    dir,
    configFile,
    url,
    /** `MQTT_URL` for the service. */
    serviceUrl: url(SERVICE_USER.username, SERVICE_USER.password),
    get log() {
      return log
    },
    /** The running Mosquitto's pid (benchmarks read its CPU time). */
    get pid() {
      return current.child.pid!
    },
    /** SIGTERM and wait for the exit; the config and dynamic-security file stay for restart(). */
    stop,
    /** Starts Mosquitto again on the same port, config and dynamic-security file (its sessions are gone: persistence is off). */
    async restart(): Promise<void> {
      await stop()
      current = await run()
    },
    async dispose(): Promise<void> {
      await stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

export type Mosquitto = Awaited<ReturnType<typeof startMosquitto>>

const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/** Resolves once Mosquitto logs that it runs (after its listeners are bound), or rejects with its log if it exits first. */
function untilRunning(child: ChildProcess, log: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`mosquitto did not start: ${log()}`)), 10_000)
    const onData = () => {
      if (!/ running\b/.test(log())) return
      clearTimeout(timer)
      child.stderr!.off('data', onData)
      resolve()
    }
    child.stderr!.on('data', onData)
    child.once('exit', () => {
      clearTimeout(timer)
      reject(new Error(`mosquitto exited during start-up: ${log()}`))
    })
  })
}
