import axe from './axe.js'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchChromium, seedQueue, signInToConsole, startConsoleWorld, type ConsoleWorld } from './console-world.js'

// The pharmacist console end to end: a real service on free ports, Debian's Chromium, one
// browser for the file and one signed-in page reused across the steps.

let world: ConsoleWorld
let browser: Browser
let context: BrowserContext
let page: Page
let scene: Awaited<ReturnType<typeof seedQueue>>
const LONG = { timeout: 20_000 }

beforeAll(async () => {
  world = await startConsoleWorld()
  scene = await seedQueue(world)
  browser = await launchChromium()
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  context.setDefaultTimeout(15_000) // a step that cannot happen fails with what it waited for
  page = await context.newPage()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await world?.stop()
})

const queueRows = () => page.locator('table.queue tbody tr')

describe('pharmacist console', () => {
  it('signs in through the authorization server and keeps no token in web storage', async () => {
    await signInToConsole(page, world.base)
    await expect.poll(() => queueRows().count(), LONG).toBe(4)
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }))
    expect(stored).not.toMatch(/eyJ|access|refresh/i)
    // The CSP allows only this origin.
    const res = await page.request.get(`${world.base}/console/`)
    expect(res.headers()['content-security-policy']).toContain("default-src 'self'")
    expect(res.headers()['content-security-policy']).not.toMatch(/unsafe-inline|https?:/)
  })

  it('reloads without asking again: the authorization server session signs the page in silently', async () => {
    await page.reload()
    await page.waitForURL(`${world.base}/console/#/`)
    await expect.poll(() => queueRows().count(), LONG).toBe(4)
  })

  it('puts the undecided break first, then the excursion, then the rest', async () => {
    const ids = await queueRows().evaluateAll((rows) => rows.map((r) => r.getAttribute('data-delivery')))
    expect(ids.slice(0, 2)).toEqual([scene.broken.deliveryId, scene.excursion.deliveryId])
    expect(new Set(ids.slice(2))).toEqual(new Set([scene.fine.deliveryId, scene.plain.delivery_id]))
    await expect.poll(() => queueRows().first().textContent()).toContain('Decision needed')
    // Filtering by cold-chain state asks the API, which answers only the matching deliveries.
    await page.getByLabel('Cold-chain state').selectOption('OK')
    await expect
      .poll(async () => queueRows().evaluateAll((rows) => rows.map((r) => r.getAttribute('data-delivery'))), LONG)
      .toEqual([scene.fine.deliveryId])
    await page.getByLabel('Cold-chain state').selectOption('')
    await expect.poll(() => queueRows().count(), LONG).toBe(4)
  })

  it('shows a new break within seconds, without a reload', async () => {
    const fresh = await world.coldDelivery(30 * 60_000, () => 5)
    await expect.poll(() => queueRows().count(), LONG).toBe(5)
    expect(await queueRows().nth(0).getAttribute('data-delivery')).toBe(scene.broken.deliveryId)
    await world.feed(fresh.tote.id, [{ ts: Date.now() - 1_000, temp_c: -3 }]) // frozen: a hard-limit break
    await expect.poll(() => queueRows().nth(0).getAttribute('data-delivery'), LONG).toBe(fresh.deliveryId)
    // Through the service's event stream (Server-Sent Events), not the polling fallback.
    expect(await page.locator('html').getAttribute('data-live')).toBe('stream')
  })

  it('draws the chart with the excursion shaded, and verifies the custody chain in the browser', async () => {
    await page.goto(`${world.base}/console/#/delivery/${scene.broken.deliveryId}`)
    await page.locator('main[data-ready="true"]').waitFor(LONG)
    await expect.poll(() => page.locator('figure.chart canvas').count()).toBeGreaterThan(0)
    expect(Number(await page.locator('figure.chart').getAttribute('data-excursions'))).toBeGreaterThanOrEqual(1)
    expect(await page.locator('.state-line').textContent()).toContain('crossed a hard limit')
    expect(await page.locator('.verify').textContent()).toContain('Chain verified in this browser')
    const timeline = await page.locator('.timeline').textContent()
    expect(timeline).toContain('Pat Pharmacist')
    expect(timeline).toContain('Dana Driver')
    expect(timeline).toMatch(/Evidence sha256:[0-9a-f]{64}/)
    expect(await page.locator('.facts').textContent()).toMatch(/C[SD]T/) // Chicago time
  })

  it('turns the badge red and points at the first bad event when a custody row is tampered with', async () => {
    await world.service.db
      .updateTable('custody_events')
      .set({ to_party: 'dr_someoneelse' })
      .where('delivery_id', '=', scene.fine.deliveryId)
      .where('seq', '=', 3)
      .execute()
    await page.goto(`${world.base}/console/#/delivery/${scene.fine.deliveryId}`)
    await page.locator('main[data-ready="true"]').waitFor(LONG)
    const badge = page.locator('.verify.bad')
    expect(await badge.textContent()).toContain('does NOT verify')
    expect(await badge.locator('a').getAttribute('href')).toBe('#custody-3')
    expect(await page.locator('#custody-3').getAttribute('class')).toBe('bad')
  })

  it('records one disposition signed with the password again: a wrong one changes nothing; name, time and meaning are shown; a second one is refused', async () => {
    // A second tab opened before the decision still shows the form: it is the one refused.
    const stale = await context.newPage()
    await stale.goto(`${world.base}/console/#/delivery/${scene.broken.deliveryId}`)
    await stale.locator('main[data-ready="true"]').waitFor(LONG)
    await stale.getByLabel('Release: the goods may be delivered').check()
    await stale.getByLabel('Note (required)').fill('Looks fine to me.')
    await stale.getByLabel('Meaning of your signature').selectOption('released')
    await stale.getByLabel('Your password (to sign)').fill(world.password)
    await page.goto(`${world.base}/console/#/delivery/${scene.broken.deliveryId}`)
    await page.locator('main[data-ready="true"]').waitFor(LONG)
    const record = page.getByRole('button', { name: 'Sign and record decision' })
    await record.click()
    expect(await page.locator('.disp-form .error').textContent()).toContain('Choose release or return')
    await page.getByLabel('Return: the goods come back').check()
    await page.getByLabel('Note (required)').fill('Frozen insulin: destroy and re-dispense.')
    await page.getByLabel('Meaning of your signature').selectOption('returned')
    await page.getByLabel('Your password (to sign)').fill('not my password at all')
    await record.click()
    await expect.poll(() => page.locator('.disp-form .error').textContent(), LONG).toContain('Wrong password: nothing was signed')
    expect(page.url()).toContain(`#/delivery/${scene.broken.deliveryId}`) // still on the page, not sent to sign in
    expect((await world.api.get(`/v1/deliveries/${scene.broken.deliveryId}`, world.admin)).body.cold_chain.disposition).toBeNull()
    await page.getByLabel('Your password (to sign)').fill(world.password)
    await record.click()
    await page.locator('.decided').waitFor()
    expect(await page.locator('.decided').textContent()).toContain('Pat Pharmacist')
    expect(await page.locator('.disposition blockquote').textContent()).toBe('Frozen insulin: destroy and re-dispense.')
    const shown = await page.locator('.disposition .signature').textContent()
    expect(shown).toMatch(/Signed by Pat Pharmacist \(pat@example\.com\) on .+ C[SD]T — meaning: Returned/)
    expect(await page.getByRole('button', { name: 'Sign and record decision' }).count()).toBe(0)
    // The signature is its own event of the chain, shown in the timeline, and the chain still verifies in the browser.
    expect(await page.locator('.timeline .signature').textContent()).toContain('meaning: Returned')
    expect(await page.locator('.verify').textContent()).toContain('Chain verified in this browser')

    // The live update does not wipe the note being written; it says the delivery changed.
    await stale.locator('.changed').waitFor(LONG)
    await stale.getByRole('button', { name: 'Sign and record decision' }).click()
    await expect.poll(() => stale.locator('.disp-form .error').textContent(), LONG).toContain('already recorded')
    await stale.close()
    const stored = await world.api.get(`/v1/deliveries/${scene.broken.deliveryId}`, world.admin)
    expect(stored.body.cold_chain.disposition).toMatchObject({
      decision: 'return',
      decided_by: { sub: world.user.id },
      signature: { signer: world.user.id, name: 'Pat Pharmacist', meaning: 'returned', method: 'password' },
    })
  })

  it('cannot be made to sign from another site: the API takes a bearer token, which a cross-origin page cannot attach', async () => {
    // The console's own origin holds the sign-in session cookie; a page elsewhere posts with it (if the browser sends it at all).
    const evil = await context.newPage()
    await evil.goto('about:blank')
    const answer = await evil.evaluate(async (url) => {
      try {
        const res = await fetch(url, {
          method: 'POST',
          credentials: 'include',
          mode: 'no-cors',
          headers: { 'content-type': 'text/plain' },
          body: JSON.stringify({ decision: 'release', note: 'forged', signature: { meaning: 'released' } }),
        })
        return res.type
      } catch {
        return 'blocked'
      }
    }, `${world.base}/v1/deliveries/${scene.excursion.deliveryId}/disposition`)
    expect(['opaque', 'blocked']).toContain(answer) // the attacker cannot even read an answer
    await evil.close()
    // The same request with the console's cookies, as the browser would send it: refused without a bearer token.
    const cookies = (await context.cookies(world.base)).map((c) => `${c.name}=${c.value}`).join('; ')
    expect(cookies).toContain('rxtrace_session')
    const res = await fetch(`${world.base}/v1/deliveries/${scene.excursion.deliveryId}/disposition`, {
      method: 'POST',
      headers: { cookie: cookies, origin: 'https://evil.example', 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'release', note: 'forged', signature: { meaning: 'released' } }),
    })
    expect(res.status).toBe(401)
    expect((await world.api.get(`/v1/deliveries/${scene.excursion.deliveryId}`, world.admin)).body.cold_chain.disposition).toBeNull()
  })

  it('can be used with the keyboard alone', async () => {
    await page.goto(`${world.base}/console/#/`)
    await expect.poll(() => queueRows().count(), LONG).toBe(5)
    // Tab from the top of the page to the first delivery link and open it with Enter.
    await page.keyboard.press('Tab') // skip link
    let reached = false
    for (let i = 0; i < 20 && !reached; i++) {
      await page.keyboard.press('Tab')
      reached = await page.evaluate(
        () => document.activeElement?.closest('table.queue tbody tr') !== null && document.activeElement?.tagName === 'A',
      )
    }
    expect(reached).toBe(true)
    const target = await page.evaluate(() => document.activeElement!.getAttribute('href'))
    await page.keyboard.press('Enter')
    await page.waitForURL(`${world.base}/console/${target}`)
    await page.locator('main[data-ready="true"]').waitFor(LONG)
    // The zoom controls answer Enter as well.
    await page.getByRole('button', { name: 'Zoom in' }).focus()
    await page.keyboard.press('Enter')
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Zoom in')
  })

  it('has no serious or critical accessibility violations (axe-core) on the queue and a delivery', async () => {
    for (const hash of ['#/', `#/delivery/${scene.excursion.deliveryId}`]) {
      await page.goto(`${world.base}/console/${hash}`)
      await page
        .locator(hash === '#/' ? 'table.queue tbody tr' : 'main[data-ready="true"]')
        .first()
        .waitFor(LONG)
      const violations = await axe(page)
      const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      expect(serious.map((v) => `${v.id}: ${v.help}`)).toEqual([])
    }
  })

  // Last: its delivery would be one more row for the queue steps above.
  it('shows the temperature each handoff recorded, and a tampered temperature fails the check in the browser', async () => {
    const cold = await world.coldDelivery(30 * 60_000, () => 5)
    const handoff = await world.api.post(`/v1/deliveries/${cold.deliveryId}/handoff`, world.admin, {
      from: world.fleet.driverId,
      to: world.fleet.driver2Id,
      signature: 'data:image/png;base64,iVBORw0KGgo=',
    })
    expect(handoff.status, handoff.text).toBe(200)
    const seq = handoff.body.custody.at(-1).seq
    await page.goto(`${world.base}/console/#/delivery/${cold.deliveryId}`)
    await page.locator('main[data-ready="true"]').waitFor(LONG)
    expect(await page.locator('.verify').textContent()).toContain('Chain verified in this browser')
    expect(await page.locator(`#custody-${seq} .handoff-temperature`).textContent()).toMatch(/5\.0 °C .*cold chain OK/)

    await world.service.db
      .updateTable('custody_events')
      .set({ temperature: JSON.stringify({ ...handoff.body.custody.at(-1).temperature, last_c: 4 }) })
      .where('delivery_id', '=', cold.deliveryId)
      .where('seq', '=', seq)
      .execute()
    await page.reload()
    await page.locator('main[data-ready="true"]').waitFor(LONG)
    expect(await page.locator('.verify.bad a').getAttribute('href')).toBe(`#custody-${seq}`)
  })
})
