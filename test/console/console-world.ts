import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import { expect } from 'vitest'
import type { Clock } from '../../src/clock.js'
import { loadConfig } from '../../src/config.js'
import { CONSOLE_DIST } from '../../src/api/routes/console.js'
import { buildService } from '../../src/service.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { freePort } from '../helpers/child-service.js'
import { TEST_ENV, withApi, type TestApi } from '../helpers/service.js'

/**
 * The console's world for browser tests, screenshots and the benchmark: a real service listening
 * on a free port (in-process, so a test can reach into its own database), a pharmacy in Chicago, a
 * pharmacist with a password, and Debian's Chromium driven by playwright-core.
 */

const PASSWORD = 'correct horse battery staple'
const CHROMIUM = '/usr/bin/chromium'
const MINUTE = 60_000

/** The console bundle is built by `npm ci` (prepare); a checkout that skipped it builds it here. */
function ensureConsoleBuilt(): void {
  if (existsSync(join(CONSOLE_DIST, 'index.html'))) return
  execFileSync('npm', ['run', 'build:console'], { cwd: join(CONSOLE_DIST, '../..'), stdio: 'inherit' })
}

/** Wall-clock time, shifted while the world is seeded so deliveries can start hours ago. */
function shiftedClock(): Clock & { shift(ms: number): void } {
  let offset = 0
  return { now: () => Date.now() + offset, shift: (ms) => void (offset = ms) }
}

export type ConsoleWorld = Awaited<ReturnType<typeof startConsoleWorld>>

export async function startConsoleWorld(env: Record<string, string> = {}) {
  ensureConsoleBuilt()
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const clock = shiftedClock()
  const config = loadConfig({ ...TEST_ENV, PORT: String(port), ISSUER: base, PASSWORD_SCRYPT_LOG2_N: '10', ...env })
  const service = await buildService(config, {
    clock,
    store: { kind: 'sqlite', file: ':memory:' },
    sink: createSqliteSink({ path: ':memory:' }),
  })
  await service.start()
  const api = withApi(service)
  const admin = await api.adminToken()
  const pharmacy = await api.pharmacy(admin, { name: 'Lakeside Pharmacy', timezone: 'America/Chicago' })
  const user = (
    await api.post('/v1/users', admin, {
      email: 'pat@example.com',
      name: 'Pat Pharmacist',
      role: 'pharmacist',
      pharmacy_id: pharmacy.id,
      password: PASSWORD,
    })
  ).body as { id: string }
  const tech = (
    await api.post('/v1/users', admin, {
      email: 'tess@example.com',
      name: 'Tess Technician',
      role: 'technician',
      pharmacy_id: pharmacy.id,
      password: PASSWORD,
    })
  ).body as { id: string }
  const fleet = await api.fleetWithDriver(admin)

  /** A refrigerated delivery dispatched and picked up `agoMs` ago, its tote's readings fed through the ingest pipeline. */
  async function coldDelivery(
    agoMs: number,
    temps: (tMs: number, startMs: number) => number | null,
    everyMs = 60_000,
    items = [{ description: 'Insulin glargine 100 U/mL pen', ndc: '00088-2220-33', quantity: 5 }],
  ) {
    clock.shift(-agoMs)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, {
      pharmacy_id: pharmacy.id,
      cold_chain: true,
      temperature_profile: 'refrigerated',
      items,
      patient_id: 'pt_4711',
    })
    expect(
      (
        await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
          fleet_id: fleet.fleetId,
          driver_id: fleet.driverId,
          tote_id: tote.id,
        })
      ).status,
    ).toBe(200)
    expect(
      (
        await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, {
          from: user.id,
          to: fleet.driverId,
          signature: 'data:image/png;base64,iVBORw0KGgo=',
        })
      ).status,
    ).toBe(200)
    const startMs = clock.now()
    const readings: { ts: number; temp_c: number }[] = []
    for (let t = startMs + 5_000; t <= Date.now(); t += everyMs) {
      const temp = temps(t, startMs)
      if (temp !== null) readings.push({ ts: t, temp_c: temp })
    }
    // The clock follows the readings as they are fed, as if they arrived live: the rule engine's
    // wall-clock silence check never sees a tote that has hours of readings still to come.
    // Batches of at most 4 minutes: readings up to 5 min ahead of the clock are accepted.
    for (let i = 0; i < readings.length;) {
      const first = readings[i]!.ts
      let j = i
      while (j < readings.length && j - i < 500 && readings[j]!.ts <= first + 4 * MINUTE) j++
      clock.shift(first - Date.now())
      await feed(tote.id, readings.slice(i, j))
      i = j
    }
    clock.shift(0)
    return { rx, tote, deliveryId: rx.delivery_id }
  }

  async function feed(toteId: string, readings: readonly { ts: number; temp_c: number }[]) {
    for (let i = 0; i < readings.length; i += 500)
      await service.pipeline.handle(toteId, Buffer.from(JSON.stringify(readings.slice(i, i + 500))))
    await service.monitor.flush()
  }

  return {
    service,
    api,
    base,
    admin,
    pharmacy,
    user,
    /** Pat's (and Tess's) password: what signing asks for again. */
    password: PASSWORD,
    tech,
    fleet,
    clock,
    coldDelivery,
    feed,
    async stop() {
      await service.stop()
    },
  }
}

/** The usual scene: one broken (frozen insulin), one in an excursion, one fine, one without a cold chain. */
export async function seedQueue(world: ConsoleWorld) {
  const fine = await world.coldDelivery(2 * 60 * MINUTE, () => 5)
  const broken = await world.coldDelivery(3 * 60 * MINUTE, (t, start) =>
    t - start > 100 * MINUTE && t - start < 130 * MINUTE ? -1.5 : 4.5,
  )
  const excursion = await world.coldDelivery(90 * MINUTE, (t) => (Date.now() - t < 12 * MINUTE ? 9.5 : 5))
  const plain = await world.api.prescription(world.admin, { pharmacy_id: world.pharmacy.id, cold_chain: false })
  return { fine, broken, excursion, plain }
}

export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-dev-shm-usage'],
  })
}

/**
 * A pharmacist's browser at the pharmacy (its calendar days are Chicago's), signed in to the
 * console: Chromium, a 1280-wide page, 15 s for any wait.
 */
export async function pharmacistBrowser(
  base: string,
  options: { height?: number; acceptDownloads?: boolean } = {},
): Promise<{ browser: Browser; page: Page }> {
  const browser = await launchChromium()
  const context = await browser.newContext({
    viewport: { width: 1280, height: options.height ?? 800 },
    timezoneId: 'America/Chicago',
    acceptDownloads: options.acceptDownloads ?? false,
  })
  context.setDefaultTimeout(15_000)
  const page = await context.newPage()
  await signInToConsole(page, base)
  return { browser, page }
}

/** Opens /console and signs in through the authorization server's form. */
export async function signInToConsole(page: Page, base: string, email = 'pat@example.com'): Promise<void> {
  await page.goto(`${base}/console/`)
  await page.getByLabel('Email').fill(email)
  await page.getByLabel('Password').fill(PASSWORD)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(`${base}/console/#/`)
}

export type { TestApi }
