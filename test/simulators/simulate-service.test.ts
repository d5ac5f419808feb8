import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort, startChildService, type ChildService } from '../helpers/child-service.js'
import { waitFor } from '../helpers/wait.js'

/**
 * `npm run simulate` as a newcomer runs it: against a service on its own ports, with a local
 * Mosquitto on another port that accepts anyone (as the system one on 1883 does).
 */

const ADMIN = ['--client-id', 'cl_reliability_admin', '--client-secret', 'reliability-admin-secret-0123456789']
const mosquittoInstalled = spawnSync('mosquitto', ['-h']).error === undefined

let service: ChildService
let token: string
let pharmacy: string
let foreign: { port: number; child: ChildProcess; dir: string } | null = null

beforeAll(async () => {
  service = await startChildService()
  token = await service.adminToken()
  const created = await service.post('/v1/pharmacies', token, {
    name: 'Main Street Pharmacy',
    timezone: 'America/Chicago',
    address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
  })
  pharmacy = created.body.id
  if (mosquittoInstalled) foreign = await anyoneWelcomeMosquitto()
}, 90_000)

afterAll(async () => {
  foreign?.child.kill('SIGTERM')
  if (foreign) rmSync(foreign.dir, { recursive: true, force: true })
  await service?.dispose()
})

/** A Mosquitto that takes any username and password, like a default local install. */
async function anyoneWelcomeMosquitto() {
  const dir = mkdtempSync(join(tmpdir(), 'rxtrace-foreign-mosquitto-'))
  const port = await freePort()
  const lines = [`listener ${port} 127.0.0.1`, 'allow_anonymous true', 'persistence false', 'log_dest none']
  if (process.getuid?.() === 0) lines.push('user root')
  writeFileSync(join(dir, 'mosquitto.conf'), lines.join('\n') + '\n')
  const child = spawn('mosquitto', ['-c', join(dir, 'mosquitto.conf')], { stdio: 'ignore' })
  const listening = () =>
    new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => (socket.destroy(), resolve(true)))
      socket.once('error', () => resolve(false))
    })
  await waitFor(listening, 20_000, 'the foreign Mosquitto to listen')
  return { port, child, dir }
}

function simulate(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'simulators/simulate.ts', ...args, ...ADMIN], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.once('exit', (code) => (clearTimeout(timer), resolve({ code, stderr })))
  })
}

describe('npm run simulate finds the service’s broker', () => {
  it('the discovery document names the broker the service runs', async () => {
    const res = await fetch(`${service.baseUrl}/.well-known/rxtrace.json`)
    expect(res.status).toBe(200)
    const doc = (await res.json()) as { mqtt: { tcp: string; websocket: string | null } }
    expect(doc.mqtt.tcp).toBe(`mqtt://127.0.0.1:${service.mqttPort}`)
    expect(doc.mqtt.websocket).toBeNull() // MQTT_WS_PORT=off in the test service
  })

  it.runIf(mosquittoInstalled)(
    'refuses a broker that is not the service’s, naming the one that is',
    async () => {
      const run = await simulate([
        '--totes',
        '1',
        '--scenario',
        'normal',
        '--speed',
        '60',
        '--for',
        '2s',
        '--url',
        service.baseUrl,
        '--mqtt',
        `mqtt://127.0.0.1:${foreign!.port}`,
      ])
      expect(run.code, run.stderr).not.toBe(0)
      expect(run.stderr).toContain(`mqtt://127.0.0.1:${foreign!.port} is not the broker of the service at ${service.baseUrl}`)
      expect(run.stderr).toContain(`mqtt://127.0.0.1:${service.mqttPort}`)
    },
    90_000,
  )

  it('without --mqtt, plays on the service’s own broker whatever MQTT_PORT the shell holds, at the pharmacy named, with console links', async () => {
    const run = await simulate(
      ['--totes', '1', '--scenario', 'normal', '--speed', '60', '--for', '3s', '--url', service.baseUrl, '--pharmacy', pharmacy],
      {
        MQTT_PORT: String(foreign?.port ?? 1883), // a shell variable left over from elsewhere
      },
    )
    expect(run.code, run.stderr).toBe(0)
    expect(run.stderr).toContain(`mqtt://127.0.0.1:${service.mqttPort}`)
    expect(run.stderr).toContain(`${pharmacy} (Main Street Pharmacy)`)
    const link = run.stderr.match(/(http:\/\/\S+\/console\/#\/deliveries\/(dl_\w+))/)
    expect(link, run.stderr).not.toBeNull()
    expect(run.stderr).not.toContain('temperature.svg') // it needs a token: a pasted link would answer 401
    const delivery = await service.get(`/v1/deliveries/${link![2]}`, token)
    expect(delivery.body.pharmacy_id).toBe(pharmacy)
    const page = await fetch(link![1]!.replace(/#.*/, ''))
    expect(page.status).toBe(200)
    await expect
      .poll(async () => (await service.get(`/v1/deliveries/${link![2]}/temperature?step=1s`, token)).body.points.length, {
        timeout: 20_000,
      })
      .toBeGreaterThan(0)
  }, 90_000)
})
