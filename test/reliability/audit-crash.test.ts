import { randomBytes } from 'node:crypto'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'

/**
 * A state-changing request is in the hash-chained audit log before its answer leaves
 * (docs/api.md, Audit log). The service is SIGKILLed while writes stream in; after the restart,
 * every request that got a 2xx answer has its record, and the chain still verifies. Two kinds of
 * write: a prescription (its service writes the record in the transaction of the change) and a
 * fleet rename (the record is committed in a transaction of its own before the answer).
 */

const children: ChildService[] = []
afterEach(async () => {
  for (const child of children.splice(0).reverse()) await child.dispose()
})

const { url } = await reachablePostgres()
const schemas = postgresSchemas(url ?? 'postgres://unreachable')
afterAll(() => schemas.drop())

type Setup = { token: string; pharmacyId: string; fleetId: string }

async function setUp(svc: ChildService): Promise<Setup> {
  const token = await svc.adminToken()
  const pharmacy = await svc.post<{ id: string }>('/v1/pharmacies', token, {
    name: 'Audited Pharmacy',
    address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
    timezone: 'America/Chicago',
  })
  const fleet = await svc.post<{ id: string }>('/v1/fleets', token, { name: 'Audited Couriers' })
  expect([pharmacy.status, fleet.status]).toEqual([201, 201])
  return { token, pharmacyId: pharmacy.body.id, fleetId: fleet.body.id }
}

/**
 * Keeps `parallel` writes in flight against each of `targets` until `answeredBeforeKill` of them
 * got a 2xx, then SIGKILLs `victim` at once and lets the rest finish or fail. Resolves with the
 * request ids that were answered 2xx.
 */
async function writeUntilKilled(
  targets: { svc: ChildService; setup: Setup }[],
  victim: ChildService,
  { parallel, answeredBeforeKill, total }: { parallel: number; answeredBeforeKill: number; total: number },
): Promise<string[]> {
  const answered: string[] = []
  let sent = 0
  let killed = false
  const one = async ({ svc, setup }: { svc: ChildService; setup: Setup }, n: number) => {
    const requestId = `audit-crash-${randomBytes(6).toString('hex')}-${n}`
    const prescription = n % 2 === 0
    try {
      const res = await fetch(svc.baseUrl + (prescription ? '/v1/prescriptions' : `/v1/fleets/${setup.fleetId}`), {
        method: prescription ? 'POST' : 'PATCH',
        headers: {
          authorization: `Bearer ${setup.token}`,
          'content-type': 'application/json',
          'x-request-id': requestId,
          ...(prescription ? { 'idempotency-key': requestId } : {}),
        },
        body: JSON.stringify(
          prescription ? { pharmacy_id: setup.pharmacyId, patient_id: `pt_${n}`, cold_chain: false } : { name: `Couriers ${n}` },
        ),
      })
      await res.arrayBuffer()
      if (res.status < 300) answered.push(requestId)
      if (res.status >= 300 && !killed) throw new Error(`${requestId}: ${res.status}`)
    } catch (error) {
      if (!killed) throw error // before the kill every write must succeed
    }
    if (!killed && answered.length >= answeredBeforeKill) {
      killed = true
      process.kill(victim.pid, 'SIGKILL')
    }
  }
  const worker = async (target: { svc: ChildService; setup: Setup }) => {
    while (sent < total) {
      // After the kill, only the copy that lives on keeps writing.
      if (killed && target.svc === victim) return
      await one(target, sent++)
    }
  }
  await Promise.all(targets.flatMap((target) => Array.from({ length: parallel }, () => worker(target))))
  expect(killed).toBe(true)
  expect((await victim.exited).signal).toBe('SIGKILL')
  return answered
}

/** Every audit record's request id (an unrestricted token reads them all), and the deployment chain's verdict. */
async function auditOf(svc: ChildService): Promise<{ requestIds: Set<string>; verdict: { valid: boolean; checked: number } }> {
  const token = await svc.adminToken()
  const requestIds = new Set<string>()
  let cursor: string | null = null
  do {
    const page: { status: number; body: { data: { request_id: string }[]; next_cursor: string | null } } = await svc.get(
      `/v1/audit-events?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      token,
    )
    expect(page.status).toBe(200)
    for (const record of page.body.data) requestIds.add(record.request_id)
    cursor = page.body.next_cursor
  } while (cursor)
  const verdict = await svc.get<{ valid: boolean; checked: number }>('/v1/audit-events/verify?limit=10000', token)
  expect(verdict.status).toBe(200)
  return { requestIds, verdict: verdict.body }
}

describe('the audit log across a SIGKILL', () => {
  it('on SQLite, holds a record of every write that was answered 2xx, and its chain verifies', async () => {
    const svc = await startChildService()
    children.push(svc)
    const setup = await setUp(svc)
    const answered = await writeUntilKilled([{ svc, setup }], svc, { parallel: 16, answeredBeforeKill: 150, total: 400 })

    const restarted = await svc.restart()
    children.push(restarted)
    const { requestIds, verdict } = await auditOf(restarted)
    expect(answered.filter((id) => !requestIds.has(id))).toEqual([])
    expect(verdict.valid).toBe(true)
    expect(verdict.checked).toBeGreaterThanOrEqual(answered.length)
  }, 240_000)

  it.skipIf(!url)(
    'with two copies on PostgreSQL, one SIGKILLed mid-stream, holds every answered write of both in one chain',
    async () => {
      const schema = await schemas.create()
      const env = {
        DATABASE_URL: `${url}?options=${encodeURIComponent(`-c search_path=${schema}`)}`,
        SECRETS_KEY: randomBytes(32).toString('base64'),
      }
      const a = await startChildService({ env })
      children.push(a)
      const b = await startChildService({ env })
      children.push(b)
      const setupA = await setUp(a)
      const setupB = { ...setupA, token: await b.adminToken() }
      const answered = await writeUntilKilled(
        [
          { svc: a, setup: setupA },
          { svc: b, setup: setupB },
        ],
        a,
        { parallel: 8, answeredBeforeKill: 150, total: 400 },
      )

      const restarted = await a.restart()
      children.push(restarted)
      const { requestIds, verdict } = await auditOf(restarted)
      expect(answered.filter((id) => !requestIds.has(id))).toEqual([])
      expect(verdict.valid).toBe(true)
      expect(verdict.checked).toBeGreaterThanOrEqual(answered.length)
    },
    240_000,
  )
})
