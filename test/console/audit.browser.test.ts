import { readFileSync } from 'node:fs'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import axe from './axe.js'
import { signInToConsole, startConsoleWorld, type ConsoleWorld, pharmacistBrowser } from './console-world.js'

// The audit review page in Debian's Chromium: a pharmacist sees their own pharmacy's trail, filters
// it by delivery, action and person, and exports what the filters select as CSV; another
// pharmacy's records never appear.

let world: ConsoleWorld
let browser: Browser
let page: Page
let ours: string[]
let theirs: string

beforeAll(async () => {
  world = await startConsoleWorld()
  // Made with a pharmacy-restricted client of Lakeside: records in Lakeside's trail.
  const lakesideApp = await world.api.post('/v1/oauth/clients', world.admin, {
    client_name: 'Lakeside PMS',
    pharmacy_id: world.pharmacy.id,
    scope: 'prescriptions:write deliveries:write',
  })
  expect(lakesideApp.status, lakesideApp.text).toBe(201)
  const lakeside = await world.api.tokenFor(lakesideApp.body.client_id, lakesideApp.body.client_secret)
  ours = []
  for (const n of [1, 2])
    ours.push((await world.api.prescription(lakeside, { pharmacy_id: world.pharmacy.id, patient_id: `pt_l${n}` })).delivery_id)
  // And another pharmacy's, through its own client.
  const elm = await world.api.pharmacy(world.admin, { name: 'Elm Street Pharmacy' })
  const elmApp = await world.api.post('/v1/oauth/clients', world.admin, {
    client_name: 'Elm PMS',
    pharmacy_id: elm.id,
    scope: 'prescriptions:write',
  })
  const elmToken = await world.api.tokenFor(elmApp.body.client_id, elmApp.body.client_secret)
  theirs = (await world.api.prescription(elmToken, { pharmacy_id: elm.id, patient_id: 'pt_elm' })).delivery_id

  ;({ browser, page } = await pharmacistBrowser(world.base, { acceptDownloads: true }))
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await world?.stop()
})

const shownRows = () =>
  page.locator('table.audit tbody tr').evaluateAll((rows) => rows.map((r) => Array.from(r.querySelectorAll('td'), (td) => td.textContent)))

describe('the audit review page', () => {
  it("lists the pharmacy's trail and none of another pharmacy's", async () => {
    await page.getByRole('link', { name: 'Audit trail' }).click()
    await page.getByRole('heading', { name: 'Audit trail' }).waitFor()
    await expect.poll(async () => (await shownRows()).filter((r) => r[2] === 'createPrescription').map((r) => r[5])).toEqual(ours)
    const rows = await shownRows()
    expect(rows.some((r) => r.includes(theirs))).toBe(false)
  })

  it('filters by delivery, by action and by person', async () => {
    await page.getByLabel('Delivery').fill(ours[1]!)
    await page.getByLabel('Delivery').press('Enter')
    await expect.poll(async () => (await shownRows()).map((r) => [r[2], r[5]])).toEqual([['createPrescription', ours[1]]])
    // Another pharmacy's delivery, asked for by name: nothing.
    await page.getByLabel('Delivery').fill(theirs)
    await page.getByLabel('Delivery').press('Enter')
    await expect.poll(async () => (await shownRows()).length).toBe(0)
    await page.getByLabel('Delivery').fill('')
    await page.getByLabel('Delivery').press('Enter')

    await page.getByLabel('Action').fill('listAuditEvents')
    await page.getByLabel('Action').press('Enter')
    await expect.poll(async () => new Set((await shownRows()).map((r) => r[2]))).toEqual(new Set(['listAuditEvents']))
    await page.getByLabel('User (id)').fill(world.user.id)
    await page.getByLabel('User (id)').press('Enter')
    await expect.poll(async () => (await shownRows()).length).toBeGreaterThan(0)
    expect(new Set((await shownRows()).map((r) => r[1]))).toEqual(new Set([world.user.id]))
    await page.getByLabel('User (id)').fill('')
    await page.getByLabel('User (id)').press('Enter')
    await page.getByLabel('Action').fill('createPrescription')
    await page.getByLabel('Action').press('Enter')
    await expect.poll(async () => (await shownRows()).map((r) => r[5])).toEqual(ours)
  })

  it('exports the filtered records as a CSV file', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()])
    const text = readFileSync((await download.path())!, 'utf8')
    const [header, ...lines] = text.trim().split('\r\n')
    expect(header!.split(',')).toContain('delivery_id')
    expect(lines).toHaveLength(2)
    expect(lines.every((line) => line.includes('createPrescription'))).toBe(true)
    expect(ours.every((id) => text.includes(id))).toBe(true)
    expect(text).not.toContain(theirs)
  })

  it('has no serious or critical accessibility violations (axe-core), and a technician has no audit page', async () => {
    const violations = await axe(page)
    expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([])
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    const tech = await context.newPage()
    await signInToConsole(tech, world.base, 'tess@example.com')
    await tech.getByRole('heading', { name: 'Attention queue' }).waitFor()
    expect(await tech.getByRole('link', { name: 'Audit trail' }).count()).toBe(0)
    await context.close()
  })
})
