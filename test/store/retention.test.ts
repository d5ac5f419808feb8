import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { iso } from '../../src/clock.js'
import { createPostgresSink } from '../../src/timeseries/postgres-sink.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'
import { testClock } from '../helpers/clock.js'
import { readingRow } from '../helpers/reading-row.js'

/**
 * Retention (docs/operations.md, Retention) over a whole service: what one expiry pass removes and
 * keeps, with the deliveries as the entity store holds them, on SQLite and PostgreSQL.
 */

const { url } = await reachablePostgres()
const DAY = 86_400_000
const HOUR = 3_600_000
const NOW = Date.UTC(2026, 2, 15, 12)
const RECORDS_DAYS = 2_190

type Engine = { name: string; start(clock: ReturnType<typeof testClock>, env?: Record<string, string>): Promise<TestApi> }
const schemas = postgresSchemas(url ?? 'postgres://unreachable')
afterAll(() => schemas.drop())

const engines: Engine[] = [{ name: 'SQLite', start: (clock, env = {}) => startTestService(env, { clock }) }]
if (url)
  engines.push({
    name: 'PostgreSQL',
    async start(clock, env = {}) {
      const schema = await schemas.create()
      return startTestService(env, { clock, store: { kind: 'postgres', url, schema }, sink: createPostgresSink({ url, schema }) })
    },
  })

let api: TestApi | undefined
afterEach(async () => {
  await api?.service.stop()
  api = undefined
})

/** A delivery row as the store keeps it: bound to `tote` from `from`, ended at `to` (null: open). */
function delivery(id: string, tote: string, from: number, to: number | null) {
  return {
    id,
    rx_id: `rx_${id}`,
    pharmacy_id: 'ph_retention',
    status: to === null ? 'DISPATCHED' : 'DELIVERED',
    eta: iso(from),
    tote_id: tote,
    cold_chain_required: 1,
    bound_from: iso(from),
    bound_to: to === null ? null : iso(to),
    ended_at: to === null ? null : iso(to),
    version: 1,
    event_seq: 1,
    leg: 1,
    created_at: iso(from),
    updated_at: iso(to ?? from),
  }
}

for (const engine of engines) {
  describe(`Retention on ${engine.name}`, () => {
    it('keeps the readings of open deliveries and of deliveries ended inside RETENTION_RECORDS_DAYS, whatever their age', async () => {
      const clock = testClock(NOW)
      api = await engine.start(clock)
      const { db, sink, expirer } = api.service
      const old = NOW - (RECORDS_DAYS + 30) * DAY // older than the records cutoff
      await db
        .insertInto('deliveries')
        .values([
          delivery('dl_open', 'tt_1', old, null), // open for 6 years (a tote never handed back): kept
          delivery('dl_recent', 'tt_2', old, NOW - 100 * DAY), // ended 100 days ago: kept
          delivery('dl_gone', 'tt_3', old - DAY, old), // ended before the cutoff: its readings go
          delivery('dl_new', 'tt_4', NOW - DAY, null), // bound after the cutoff: nothing of it is old
          // Failed on its first attempt before the cutoff (its priced end, ended_at), delivered on a
          // reattempt 100 days ago: its record ends then, so its readings are kept.
          { ...delivery('dl_reattempted', 'tt_6', old, NOW - 100 * DAY), ended_at: iso(old + DAY) },
        ])
        .execute()
      expect([...(await expirer.keepDeliveries(NOW - RECORDS_DAYS * DAY))].sort()).toEqual(
        ['dl_open', 'dl_recent', 'dl_new', 'dl_reattempted'].sort(),
      )
      if (!sink.expire) return // this engine's reading store keeps every reading (no `expire` yet)

      const r = (tote: string, ts: number, deliveryId: string | null) =>
        readingRow({ tote_id: tote, ts, delivery_id: deliveryId, rx_id: deliveryId && `rx_${deliveryId}`, received_at: ts })
      await sink.write([
        r('tt_1', old + DAY, 'dl_open'),
        r('tt_2', old + DAY, 'dl_recent'),
        r('tt_3', old - DAY / 2, 'dl_gone'),
        r('tt_4', NOW - DAY / 2, 'dl_new'),
        r('tt_6', old + DAY / 2, 'dl_reattempted'), // during the failed first attempt
        r('tt_5', NOW - 8 * DAY, null), // an idle tote, past RETENTION_UNBOUND_DAYS: goes
        r('tt_5', NOW - 6 * DAY, null), // inside: stays
      ])
      const pass = await expirer.pass()
      expect(pass).toMatchObject({ removed: 2, complete: true })
      expect(await sink.count()).toBe(5)
      expect(await sink.readingsForDelivery('dl_reattempted', 0, NOW)).toHaveLength(1)
      expect(await sink.readingsForDelivery('dl_open', 0, NOW)).toHaveLength(1)
      expect(await sink.readingsForDelivery('dl_recent', 0, NOW)).toHaveLength(1)
      expect(await sink.readingsForDelivery('dl_gone', 0, NOW)).toHaveLength(0)
      expect((await sink.readingsForTote('tt_5', 0, NOW)).map((x) => x.ts)).toEqual([NOW - 6 * DAY])

      const metrics = await api.request('GET', '/metrics')
      expect(metrics.text).toMatch(/rxtrace_retention_removed_total\{table="readings"\} 2/)
      expect(metrics.text).toMatch(/rxtrace_retention_last_pass_timestamp_seconds [1-9]/)
    })

    it('expires idempotency keys, webhook attempts, finished messages, sessions and refresh tokens as documented, and no record', async () => {
      const clock = testClock(NOW)
      api = await engine.start(clock)
      const { db, expirer } = api.service
      const at = (days: number) => iso(NOW - days * DAY)
      await db
        .insertInto('idempotency_keys')
        .values(
          [
            ['k_expired', at(0.01)],
            ['k_live', iso(NOW + DAY / 2)],
          ].map(([key, expires]) => ({
            client_id: 'cl_x',
            key: key!,
            request_hash: 'h',
            state: 'done',
            status: 201,
            body: '{}',
            headers: '{}',
            created_at: at(1),
            expires_at: expires!,
          })),
        )
        .execute()
      const attempt = (id: string, days: number) => ({
        id,
        message_id: `msg_${id}`,
        endpoint_id: 'we_x',
        event_id: 'evt_x',
        attempt: 1,
        at: at(days),
        status_code: 200,
        error: null,
        duration_ms: 5,
        success: 1,
      })
      await db
        .insertInto('webhook_attempts')
        .values([attempt('wa_old', 31), attempt('wa_new', 29)])
        .execute()
      const message = (id: string, days: number, state: 'pending' | 'delivered') => ({
        id,
        event_id: `evt_${id}`,
        endpoint_id: 'we_x',
        state,
        attempts: 1,
        next_attempt_at: null,
        lease_until: null,
        created_at: NOW - days * DAY,
      })
      await db
        .insertInto('webhook_messages')
        .values([
          message('msg_done_old', 31, 'delivered'),
          message('msg_pending_old', 31, 'pending'),
          message('msg_done_new', 29, 'delivered'),
        ])
        .execute()
      const session = (id: string, days: number) => ({
        id_hash: id,
        user_id: 'us_x',
        created_at: at(days),
        last_seen_at: at(days),
        ended_at: null,
      })
      await db
        .insertInto('user_sessions')
        .values([session('s_old', 32), session('s_new', 2)])
        .execute()
      const refresh = (hash: string, days: number) => ({
        token_hash: hash,
        family_id: `fam_${hash}`,
        client_id: 'cl_x',
        user_id: 'us_x',
        session_hash: 's_new',
        scope: 'openid',
        family_created_at: at(days),
        created_at: at(days),
        expires_at: at(days - 1),
        access_jti: `jti_${hash}`,
        access_expires_at: at(days),
        rotated_at: null,
        revoked_at: null,
      })
      await db
        .insertInto('refresh_tokens')
        .values([refresh('rt_old', 32), refresh('rt_new', 29)])
        .execute()
      const auditBefore = await db
        .selectFrom('audit_events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()

      await expirer.pass()
      const ids = async (
        table: 'idempotency_keys' | 'webhook_attempts' | 'webhook_messages' | 'user_sessions' | 'refresh_tokens',
        column: string,
      ) =>
        (
          (await db
            .selectFrom(table)
            .select(`${column} as v` as any)
            .orderBy(column as any)
            .execute()) as { v: string }[]
        ).map((r) => r.v)
      expect(await ids('idempotency_keys', 'key')).toEqual(['k_live'])
      expect(await ids('webhook_attempts', 'id')).toEqual(['wa_new'])
      expect(await ids('webhook_messages', 'id')).toEqual(['msg_done_new', 'msg_pending_old'])
      expect(await ids('user_sessions', 'id_hash')).toEqual(['s_new'])
      expect(await ids('refresh_tokens', 'token_hash')).toEqual(['rt_new'])
      const auditAfter = await db
        .selectFrom('audit_events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
      expect(Number(auditAfter.n)).toBe(Number(auditBefore.n))
      const metrics = await api.request('GET', '/metrics')
      expect(metrics.text).toMatch(/rxtrace_retention_removed_total\{table="webhook_attempts"\} 1/)
    })

    it('tries a readings batch the store deferred again after the pause, and counts it in /metrics', async () => {
      const clock = testClock(NOW)
      api = await engine.start(clock, { RETENTION_PAUSE_MS: '10' })
      const { sink, expirer } = api.service
      if (!sink.expire) return
      const expire = sink.expire.bind(sink)
      // As the SQLite sink answers while its WAL checkpoints are behind ingest, twice.
      let deferrals = 2
      sink.expire = (request) => (deferrals-- > 0 ? Promise.resolve({ removed: 0, more: true, deferred: true }) : expire(request))
      await sink.write([readingRow({ tote_id: 'tt_idle', ts: NOW - 8 * DAY, received_at: NOW - 8 * DAY })])
      expect(await expirer.pass()).toMatchObject({ removed: 1, complete: true })
      expect(await sink.count()).toBe(0)
      const metrics = await api.request('GET', '/metrics')
      expect(metrics.text).toMatch(/rxtrace_retention_deferred_batches_total 2/)
    })

    it('expires a backlog of records bigger than RETENTION_BATCH in one pass, batch by batch', async () => {
      const clock = testClock(NOW)
      api = await engine.start(clock, { RETENTION_BATCH: '100', RETENTION_PAUSE_MS: '0' })
      const { db, expirer } = api.service
      await db
        .insertInto('idempotency_keys')
        .values(
          Array.from({ length: 250 }, (_, i) => ({
            client_id: 'cl_x',
            key: `k_old_${i}`,
            request_hash: 'h',
            state: 'done',
            status: 201,
            body: '{}',
            headers: '{}',
            created_at: iso(NOW - 2 * DAY),
            expires_at: iso(NOW - DAY - i * 1_000),
          })),
        )
        .execute()
      await expirer.pass()
      const left = await db
        .selectFrom('idempotency_keys')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('key', 'like', 'k_old_%')
        .executeTakeFirstOrThrow()
      expect(Number(left.n)).toBe(0)
    })

    it('accepts a dispatch backdated past RETENTION_UNBOUND_DAYS: the readings still stored become the delivery’s and stay', async () => {
      const clock = testClock(NOW - 10 * DAY)
      api = await engine.start(clock)
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      const { fleetId } = await api.fleetWithDriver(admin)
      const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
      const { sink, expirer } = api.service
      // The tote reported for nine days, bound to nothing; the dispatch is recorded only afterwards.
      await sink.write(Array.from({ length: 9 }, (_, i) => readingRow({ tote_id: tote.id, ts: NOW - (9 - i) * DAY })))
      clock.set(NOW)
      await expirer.pass() // the idle tote's readings older than 7 days go (where the engine expires readings)
      const stored = sink.expire ? 7 : 9
      expect(await sink.count()).toBe(stored)

      const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, await api.adminToken(), {
        fleet_id: fleetId,
        tote_id: tote.id,
        occurred_at: iso(NOW - 9.5 * DAY), // before every reading, and past the unbound window
      })
      expect(dispatched.status).toBe(200)
      await vi.waitFor(async () => expect(await sink.readingsForDelivery(rx.delivery_id, 0, NOW)).toHaveLength(stored), { timeout: 15_000 })
      await expirer.pass()
      expect(await sink.readingsForDelivery(rx.delivery_id, 0, NOW)).toHaveLength(stored)
    })

    /** The service on `clock`, with a fleet, a tote and a queued delivery (not cold chain) of one pharmacy. */
    async function toteAndDelivery(clock: ReturnType<typeof testClock>, env: Record<string, string> = {}) {
      api = await engine.start(clock, env)
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      const { fleetId } = await api.fleetWithDriver(admin)
      const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: false })
      return { started: api, fleetId, tote, rx }
    }

    it('applies a binding change its readings could not follow (the store failed every retry) before a pass removes any reading', async () => {
      const T0 = NOW - 10 * DAY
      const clock = testClock(T0 - DAY)
      const { started, fleetId, tote, rx } = await toteAndDelivery(clock)
      const { sink, expirer, db } = started.service
      if (!sink.expire) return
      // Two readings while the goods waited in the tote; the dispatch is recorded three days later,
      // as made before them, while the readings store refuses every change.
      await sink.write([readingRow({ tote_id: tote.id, ts: T0 + HOUR }), readingRow({ tote_id: tote.id, ts: T0 + 2 * HOUR })])
      const attribute = vi.spyOn(sink, 'attribute').mockRejectedValue(new Error('store unavailable'))
      clock.set(T0 + 3 * DAY)
      const dispatched = await started.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, await started.adminToken(), {
        fleet_id: fleetId,
        tote_id: tote.id,
        occurred_at: iso(T0),
      })
      expect(dispatched.status, dispatched.text).toBe(200)
      await vi.waitFor(() => expect(attribute).toHaveBeenCalledTimes(3), { timeout: 15_000 }) // the follow's retries, all failed
      const pending = () => db.selectFrom('deliveries').select('follow_pending').where('id', '=', rx.delivery_id).executeTakeFirstOrThrow()
      expect((await pending()).follow_pending).not.toBeNull()

      // Eight days on the readings are still the idle tote's, past RETENTION_UNBOUND_DAYS: a pass
      // while the store still refuses removes none of them, and a pass once it answers binds them first.
      clock.set(T0 + 8 * DAY)
      const pendingGauge = async () => /rxtrace_binding_follows_pending (\d+)/.exec((await started.request('GET', '/metrics')).text)?.[1]
      expect(await expirer.pass()).toMatchObject({ removed: 0, complete: false })
      expect(await sink.readingsForTote(tote.id, 0, NOW)).toHaveLength(2)
      expect(await pendingGauge()).toBe('1')
      attribute.mockRestore()
      expect(await expirer.pass()).toMatchObject({ removed: 0, complete: true })
      expect(await pendingGauge()).toBe('0')
      expect(await sink.readingsForDelivery(rx.delivery_id, 0, NOW)).toHaveLength(2)
      expect((await pending()).follow_pending).toBeNull()
    })

    it('removes no idle tote’s reading after a dispatch backdated past RETENTION_UNBOUND_DAYS is recorded in the middle of a pass', async () => {
      const clock = testClock(NOW - 12 * DAY)
      const { started, fleetId, tote, rx } = await toteAndDelivery(clock, { RETENTION_BATCH: '100', RETENTION_PAUSE_MS: '0' })
      const { sink, expirer } = started.service
      if (!sink.expire) return
      await sink.write(Array.from({ length: 250 }, (_, i) => readingRow({ tote_id: tote.id, ts: NOW - 10 * DAY + i * 60_000 })))
      clock.set(NOW)
      // The readings store refuses the follow, so the dispatch stays pending for the rest of the pass.
      const attribute = vi.spyOn(sink, 'attribute').mockRejectedValue(new Error('store unavailable'))
      const expire = sink.expire.bind(sink)
      let batches = 0
      sink.expire = async (request) => {
        const result = await expire(request)
        if (++batches === 1) {
          const dispatched = await started.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, await started.adminToken(), {
            fleet_id: fleetId,
            tote_id: tote.id,
            occurred_at: iso(NOW - 11 * DAY), // before every reading, and past the unbound window
          })
          expect(dispatched.status, dispatched.text).toBe(200)
        }
        return result
      }
      // The first batch removed 100 of the idle tote's readings; from the next one on, they are the dispatch's.
      expect(await expirer.pass()).toMatchObject({ removed: 100, complete: false })
      expect(await sink.readingsForTote(tote.id, 0, NOW)).toHaveLength(150)
      attribute.mockRestore()
    })

    it('keeps a later binding change pending when an earlier one’s follow finishes after it', async () => {
      const { started, fleetId, tote, rx } = await toteAndDelivery(testClock(NOW))
      const { sink, db } = started.service
      // The dispatch's follow is slow; the cancel's finds the store refusing every try.
      const attribute = sink.attribute.bind(sink)
      let opened!: () => void
      const gate = new Promise<void>((resolve) => (opened = resolve))
      let calls = 0
      const spy = vi.spyOn(sink, 'attribute').mockImplementation(async (...args) => {
        if (++calls === 1) return gate.then(() => attribute(...args))
        throw new Error('store unavailable')
      })
      const act = async (action: string, body: Record<string, unknown>) => {
        const res = await started.post(`/v1/deliveries/${rx.delivery_id}/${action}`, await started.adminToken(), body)
        expect(res.status, res.text).toBe(200)
        return res
      }
      await act('dispatch', { fleet_id: fleetId, tote_id: tote.id })
      await vi.waitFor(() => expect(calls).toBe(1))
      await act('cancel', { reason: 'patient_request' })
      opened()
      // The cancel's three tries take 3 s; the dispatch's follow, let through before them, is long done.
      await vi.waitFor(() => expect(calls).toBe(4), { timeout: 15_000 })
      const row = await db
        .selectFrom('deliveries')
        .select(['follow_pending', 'version'])
        .where('id', '=', rx.delivery_id)
        .executeTakeFirstOrThrow()
      expect(row.follow_pending).toBe(row.version) // the cancel's, which no follow has applied
      spy.mockRestore()
    })
  })
}
