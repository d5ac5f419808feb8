import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import pino from 'pino'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { Expirer, type RetentionMetrics } from '../../src/timeseries/expirer.js'
import type { Db } from '../../src/store/schema.js'
import { openEntityStore } from '../../src/store/database.js'
import { up as partitionReadings } from '../../src/store/migrations/0061_reading_partitions.js'
import { monthPartitions } from '../../src/timeseries/postgres-partitions.js'
import { createPostgresSink } from '../../src/timeseries/postgres-sink.js'
import type { ReadingRow, ReadingSink } from '../../src/timeseries/sink.js'
import { readingRow } from '../helpers/reading-row.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'
import { expireAll } from './sink-contract.js'

// PostgreSQL readings partitioned by month (migration 0061, timeseries/postgres-partitions.ts).
const { url } = await reachablePostgres()
const DAY = 86_400_000
const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))

describe.skipIf(!url && !process.env.CI)('PostgreSQL readings by month', () => {
  const schemas = postgresSchemas(url ?? 'postgres://unreachable')
  afterAll(() => schemas.drop())
  const pool = (schema: string) => new pg.Pool({ connectionString: url!, options: `-c search_path=${schema}`, max: 2 })
  const r = (tote: string, ts: number, deliveryId: string | null): ReadingRow =>
    readingRow({ tote_id: tote, ts, delivery_id: deliveryId, rx_id: deliveryId && `rx_${deliveryId}` })
  /** Runs `body` with a fresh schema's readings sink and a pool of its own on that schema; closes both after. */
  async function withSink(body: (sink: ReadingSink, db: pg.Pool, schema: string) => Promise<void>) {
    const schema = await schemas.create()
    const sink = createPostgresSink({ url: url!, schema })
    const db = pool(schema)
    try {
      await body(sink, db, schema)
    } finally {
      await sink.close()
      await db.end()
    }
  }

  /** An expirer of `sink` at `now`: idle readings kept 7 days, records 6 years, batches of `batch`, no pause. */
  const expirerOn = (db: Db, sink: ReadingSink, now: number, batch: number, metrics?: RetentionMetrics) =>
    new Expirer({
      db,
      dialect: 'postgres',
      sink,
      clock: { now: () => now },
      logger: pino({ level: 'silent' }),
      policy: { recordsDays: 2_190, unboundDays: 7, attemptsDays: 30, batch, pauseMs: 0 },
      ...(metrics ? { metrics } : {}),
    })

  /**
   * Makes `change` in a transaction of its own and starts `act` while it is open; once a statement
   * of `act` (one like `statement`) waits for the change's locks, commits the change. Resolves with
   * what `act` did.
   */
  async function racing<T>(db: pg.Pool, change: (holder: pg.PoolClient) => Promise<unknown>, act: () => Promise<T>, statement = '%') {
    const holder = await db.connect()
    try {
      await holder.query('begin')
      await change(holder)
      const acting = act()
      const { pid } = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!
      const waiting = `select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid)) and query like $2`
      await expect.poll(async () => (await db.query(waiting, [pid, statement])).rowCount, { timeout: 10_000 }).toBe(1)
      await holder.query('commit')
      return await acting
    } finally {
      await holder.query('rollback').catch(() => {})
      holder.release()
    }
  }

  it('reads a delivery’s trace from the partitions of its interval only (EXPLAIN)', () =>
    withSink(async (sink, db) => {
      const jan = Date.UTC(2026, 0, 15)
      await sink.write([r('tt_a', jan, 'dl_a'), r('tt_a', jan + 31 * DAY, 'dl_a'), r('tt_a', jan + 59 * DAY, 'dl_a')])
      const { rows } = await db.query<{ 'QUERY PLAN': string }>(
        'explain select * from readings where delivery_id = $1 and ts >= $2 and ts < $3',
        ['dl_a', Date.UTC(2026, 1, 10), Date.UTC(2026, 1, 20)],
      )
      const plan = rows.map((row) => row['QUERY PLAN']).join('\n')
      expect(plan).toContain('readings_p202602')
      expect(plan).not.toMatch(/readings_p202601|readings_p202603|readings_default/)
      expect(await sink.readingsForDelivery('dl_a', Date.UTC(2026, 1, 1), Date.UTC(2026, 2, 1))).toHaveLength(1)
    }))

  it('drops a month whole when nothing in it is kept, and deletes row by row in a month holding a kept delivery’s reading', () =>
    withSink(async (sink, db) => {
      const now = Date.UTC(2026, 2, 15)
      const jan = Date.UTC(2019, 0, 10)
      const feb = Date.UTC(2019, 1, 10)
      await sink.write([
        r('tt_a', jan, null),
        r('tt_a', jan + DAY, 'dl_gone'),
        r('tt_b', feb, 'dl_kept'),
        r('tt_b', feb + DAY, null),
        r('tt_c', feb, 'dl_gone'),
      ])
      const request = {
        unboundBeforeMs: now - 7 * DAY,
        boundBeforeMs: now - 2_190 * DAY,
        keepDeliveries: new Set(['dl_kept']),
        limit: 1_000,
      }
      const results = await expireAll(sink, request)
      const names = (await monthPartitions(db)).map((m) => m.name)
      expect(names).not.toContain('readings_p201901')
      // Counted though the planner never counted the month (it was never analyzed): 2 dropped, 2 deleted.
      expect(results.reduce((n, result) => n + result.removed, 0)).toBe(4)
      expect(names).toContain('readings_p201902')
      expect((await sink.readingsForTote('tt_b', 0, now)).map((x) => [x.ts, x.delivery_id])).toEqual([[feb, 'dl_kept']])
      expect(await sink.count()).toBe(1)
    }))

  it('keeps a reading that was bound to a kept delivery while its batch was deleting it', () =>
    withSink(async (sink, db) => {
      const now = Date.UTC(2026, 2, 15)
      const old = now - 30 * DAY
      // A kept delivery's reading in the month: it is deleted row by row, not dropped.
      await sink.write([r('tt_kept', old, 'dl_kept'), r('tt_a', old + 1, null), r('tt_a', old + 2, null)])
      // A dispatch backdated over the first reading, not yet committed when the batch picks it: the
      // batch's delete (inside its pick statement) waits for the binding's row lock; then the binding commits.
      const pass = await racing(
        db,
        (binder) =>
          binder.query(`update readings set delivery_id = 'dl_late', rx_id = 'rx_dl_late' where tote_id = 'tt_a' and ts = $1`, [old + 1]),
        () =>
          sink.expire!({
            unboundBeforeMs: now - 7 * DAY,
            boundBeforeMs: now - 2_190 * DAY,
            keepDeliveries: new Set(['dl_kept', 'dl_late']),
            limit: 100,
          }),
        '%delete from readings%',
      )
      expect(pass).toEqual({ removed: 1, more: false })
      expect((await sink.readingsForTote('tt_a', 0, now)).map((x) => [x.ts, x.delivery_id])).toEqual([[old + 1, 'dl_late']])
    }))

  it('keeps a month whose kept delivery’s reading was being stored when the month was about to be dropped', () =>
    withSink(async (sink, db) => {
      const now = Date.UTC(2026, 2, 15)
      const jan = Date.UTC(2019, 0, 10)
      await sink.write([r('tt_idle', jan, null)])
      // A tote back from weeks offline uploads a reading of its open delivery into that old month:
      // the insert is in flight (not committed) when the pass looks at the month, and the drop
      // waits for its lock on the month; then it commits, as a stored reading does.
      await racing(
        db,
        (writer) =>
          writer.query(
            `insert into readings (tote_id, ts, delivery_id, rx_id, temp_c, received_at, late) values ('tt_open', $1, 'dl_open', 'rx_dl_open', 5, $1, false)`,
            [jan + DAY],
          ),
        () =>
          sink.expire!({
            unboundBeforeMs: now - 7 * DAY,
            boundBeforeMs: now - 2_190 * DAY,
            keepDeliveries: new Set(['dl_open']),
            limit: 100,
          }),
      )
      expect(await sink.readingsForDelivery('dl_open', 0, now)).toHaveLength(1)
      expect((await monthPartitions(db)).map((m) => m.name)).toContain('readings_p201901')
    }))

  it('tries a drop that meets a long read of its month once a pass, deletes the month row by row, and counts each reading once', () =>
    withSink(async (sink, db, schema) => {
      const store = await openEntityStore({ kind: 'postgres', url: url!, schema })
      const reader = await db.connect()
      // Statements that wait for the month's lock: the drop, or the lock taken before it.
      const lockAttempts: string[] = []
      const query = pg.Client.prototype.query
      const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
        if (typeof args[0] === 'string' && /^(lock|drop) table/.test(args[0])) lockAttempts.push(args[0])
        return (query as (...a: unknown[]) => unknown).apply(this, args)
      } as never)
      try {
        const now = Date.UTC(2026, 2, 15)
        await sink.write(Array.from({ length: 50 }, (_, i) => r(`tt_${i % 5}`, Date.UTC(2019, 0, 10) + i * 60_000, null)))
        // A long read of the month (an export, a backup) holds it for the whole pass.
        await reader.query('begin')
        await reader.query('select count(*) from readings_p201901')
        let removed = 0
        const expirer = expirerOn(store.db, sink, now, 10, {
          removed: (table, n) => void (table === 'readings' && (removed += n)),
          deferred: () => {},
          passDone: () => {},
          followsPending: () => {},
        })
        expect(await expirer.pass()).toMatchObject({ removed: 50, complete: true })
        expect(lockAttempts.filter((text) => text.includes('readings_p201901'))).toHaveLength(1)
        expect(removed).toBe(50)
        expect(await sink.count()).toBe(0)
      } finally {
        spy.mockRestore()
        await reader.query('rollback').catch(() => {})
        reader.release()
        await store.close()
      }
    }))

  it('moves the readings of an existing unpartitioned table into month partitions (migration 0061)', async () => {
    const schema = `rx_test_old_${Math.random().toString(16).slice(2, 10)}`
    const admin = new pg.Client({ connectionString: url! })
    await admin.connect()
    await admin.query(`create schema ${schema}`)
    const db = pool(schema)
    const kysely = new Kysely<any>({ dialect: new PostgresDialect({ pool: db }) })
    try {
      // The tables as migration 0009 left them.
      await db.query(`
        create table deliveries (id text primary key, tote_id text, bound_from text);
        create table readings (tote_id text not null, ts bigint not null, delivery_id text, rx_id text,
          temp_c double precision not null, battery double precision, humidity double precision,
          lat double precision, lng double precision, seq bigint, received_at bigint not null,
          late boolean not null, primary key (tote_id, ts));
        create index readings_by_delivery on readings (delivery_id, ts) where delivery_id is not null;
        insert into readings values
          ('tt_a', ${Date.UTC(2025, 10, 3)}, 'dl_a', 'rx_a', 4.5, null, null, null, null, 1, 0, false),
          ('tt_a', ${Date.UTC(2025, 11, 3)}, null, null, 5.5, 0.5, null, null, null, 2, 0, true),
          ('tt_b', 5, null, null, 6.5, null, null, null, null, null, 0, false)`)
      await partitionReadings(kysely, 'postgres')
      const names = (await monthPartitions(db)).map((m) => m.name)
      expect(names).toEqual(expect.arrayContaining(['readings_p202511', 'readings_p202512']))
      const where = await db.query<{ part: string; ts: string }>('select tableoid::regclass::text as part, ts from readings order by ts')
      expect(where.rows.map((x) => x.part)).toEqual(['readings_default', 'readings_p202511', 'readings_p202512']) // 1970: older than ten years
      const indexes = await db.query<{ indexname: string }>(
        `select indexname from pg_indexes where schemaname = $1 and tablename = 'readings'`,
        [schema],
      )
      expect(indexes.rows.map((x) => x.indexname).sort()).toEqual(['readings_by_delivery', 'readings_pkey', 'readings_unbound'])
    } finally {
      await kysely.destroy()
      await admin.query(`drop schema ${schema} cascade`)
      await admin.end()
    }
  })

  it('leaves the store consistent when the expirer is killed (SIGKILL) in the middle of a pass', async () => {
    const schema = await schemas.create()
    const sink = createPostgresSink({ url: url!, schema })
    const now = Date.UTC(2026, 2, 15)
    const old = now - 30 * DAY
    const expired = 50_000
    const batch = 1_000 // RETENTION_BATCH's default
    try {
      // One month: a kept delivery's reading in it, so the expirer deletes row by row, in batches.
      await sink.write([r('tt_kept', old, 'dl_kept')])
      for (let i = 0; i < expired; i += 10_000)
        await sink.write(Array.from({ length: 10_000 }, (_, j) => r(`tt_${(i + j) % 100}`, old + 1 + i + j, null)))
      const store = await openEntityStore({ kind: 'postgres', url: url!, schema })
      await store.db
        .insertInto('deliveries')
        .values(openDelivery('dl_kept', 'tt_kept', old))
        .execute()

      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'test/timeseries/fixtures/expiry-child.ts', url!, schema, String(now), String(batch)],
        {
          cwd: REPO_ROOT,
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)))
      // Killed as soon as the first batch is reported: the pass (50 batches) is under way.
      await new Promise<void>((resolve) => child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('batch') && resolve()))
      child.kill('SIGKILL')
      expect(await exited).toBe('SIGKILL')

      // Whole batches gone, never part of one; the kept delivery's reading untouched.
      const left = (await sink.count()) - 1
      expect(left).toBeLessThan(expired)
      expect(left).toBeGreaterThan(0)
      expect((expired - left) % batch).toBe(0)
      expect(await sink.readingsForDelivery('dl_kept', 0, now)).toHaveLength(1)
      // The killed copy's lock went with its connection: the next pass runs, and finishes the work.
      const expirer = expirerOn(store.db, sink, now, batch)
      expect(await expirer.pass()).toMatchObject({ removed: left, complete: true })
      expect(await sink.count()).toBe(1)
      await store.close()
    } finally {
      await sink.close()
    }
  }, 120_000)
})

function openDelivery(id: string, tote: string, from: number) {
  const at = new Date(from).toISOString()
  return {
    id,
    rx_id: `rx_${id}`,
    pharmacy_id: 'ph_x',
    status: 'DISPATCHED',
    eta: at,
    tote_id: tote,
    cold_chain_required: 1,
    bound_from: at,
    bound_to: null,
    ended_at: null,
    version: 1,
    event_seq: 1,
    leg: 1,
    created_at: at,
    updated_at: at,
  }
}
