import type pg from 'pg'
import { watchPool } from '../store/answer-watch.js'
import { createPool, DEFAULT_POSTGRES_LIMITS, type ConnectionErrorLog, type PostgresLimits } from '../store/database.js'
import { ensureMonthlyPartitions, expirePartitions, monthCover } from './postgres-partitions.js'
import { assertStep, type ExpiryRequest, type ReadingRow, type ReadingSink, type TemperatureBucket } from './sink.js'

/**
 * Readings in PostgreSQL, the entity store's database (`DATABASE_URL` without `QUESTDB_CONFIG`),
 * so every copy of the service on that database reads every copy's readings. The table is created
 * by migration 0009 (store/migrations/0009_shared_readings.ts) and partitioned by month of `ts` by
 * migration 0061 (timeseries/postgres-partitions.ts): a delivery's trace reads only the months of
 * its interval, and expiry drops whole months.
 *
 * - A write is one prepared statement whatever its size: the rows go as one JSON array and
 *   `json_to_recordset` turns it back into rows (a multi-row VALUES list would need 12 bound
 *   parameters per row and hit PostgreSQL's 65,535 at 5,461 rows). Measured on a 2-core VM in
 *   groups of 40, against twelve typed arrays through `unnest`: the server spends 3–5 µs per row
 *   instead of 10–12 on reading them and the service 4–6 µs instead of 6–13 on sending them; and
 *   a named statement is parsed once per connection, not 0.3–0.4 ms per write. GroupCommitter gathers
 *   the readings of `INGEST_GATHER_MS` into each write, and keeps up to `concurrentWrites` of them
 *   in flight on this sink's own pool, so ingest never queues behind the API's connections.
 * - ON CONFLICT (tote_id, ts) DO NOTHING: a retransmission, to this copy or another, is stored
 *   once; the first copy stays. Rows are sorted by (tote_id, ts) first, so two copies inserting
 *   the same keys take their locks in the same order and cannot deadlock.
 * - Committed means durable (PostgreSQL's own synchronous_commit), so the PUBACK that follows is
 *   as durable as the entity store's writes.
 * - `forward`, when given, names readings another copy must hear of (the evaluator of their
 *   delivery, telemetry/evaluation-leases.ts): they are sent with pg_notify in the insert's own
 *   statement (a data-modifying WITH), so they are announced if and only if they are stored, in
 *   one round trip instead of four (begin, insert, notify, commit).
 */

export type PostgresSinkOptions = {
  url: string
  /** The entity store's schema (tests isolate runs with one each). */
  schema?: string | undefined
  limits?: PostgresLimits
  onConnectionError?: ConnectionErrorLog
  /** Connections of the sink's own pool: writes in flight plus a reader. */
  connections?: number
  /** Payloads to send on `channel` with the write that stores `rows` (none: nothing to send). */
  forward?: { channel: string; payloads(rows: readonly ReadingRow[]): string[] }
}

/**
 * Writes in flight at once. Each waits for its own commit (a WAL flush); several let the flushes
 * of one commit serve several groups (PostgreSQL's group commit) and hide the round trip.
 */
const CONCURRENT_WRITES = 3

const INSERT = `
  insert into readings (tote_id, ts, delivery_id, rx_id, temp_c, battery, humidity, lat, lng, seq, received_at, late)
  select * from json_to_recordset($1::json) as r(
    tote_id text, ts bigint, delivery_id text, rx_id text, temp_c float8, battery float8,
    humidity float8, lat float8, lng float8, seq bigint, received_at bigint, late bool) -- the insert's column order
  on conflict (tote_id, ts) do nothing`
// One statement is one transaction: the notifications go out when, and only if, the rows commit.
const INSERT_AND_NOTIFY = `with stored as (${INSERT}) select pg_notify($2, payload) from json_array_elements_text($3::json) as payload`
const COLUMNS = 'tote_id, delivery_id, rx_id, ts, temp_c, battery, humidity, lat, lng, seq, received_at, late'

export function createPostgresSink({
  url,
  schema,
  limits = DEFAULT_POSTGRES_LIMITS,
  onConnectionError = () => {},
  connections = CONCURRENT_WRITES + 1,
  forward,
}: PostgresSinkOptions): ReadingSink {
  const pool = createPool(url, schema, limits, onConnectionError, connections)
  // A silent database fails the sink's queries after the connect deadline too (store/answer-watch.ts).
  const watch = watchPool(pool, url, limits.connectTimeoutMs)
  let writing = 0
  let drained: (() => void) | null = null
  // The month partitions a write needs exist before it (a backfill, a month just begun).
  const cover = monthCover(pool, MONTHS_AHEAD)
  // Where the expiry pass in progress picks up (see expireBatch).
  let resume = startOfPass()
  // A drop in the pass in progress gave up waiting for its locks: no more drops until the next pass.
  let dropsLockedOut = false
  const endPass = () => {
    resume = startOfPass()
    dropsLockedOut = false
  }

  const write = async (rows: readonly ReadingRow[]) => {
    await cover(rows)
    // Sorted by (tote_id, ts): see above. ReadingRow's fields are the table's columns.
    const json = JSON.stringify([...rows].sort(byToteThenTs))
    const payloads = forward?.payloads(rows) ?? []
    if (payloads.length === 0) await watch.query(pool, { name: 'rxtrace_insert_readings', text: INSERT, values: [json] })
    else
      await watch.query(pool, {
        name: 'rxtrace_insert_readings_and_notify',
        text: INSERT_AND_NOTIFY,
        values: [json, forward!.channel, JSON.stringify(payloads)],
      })
  }

  const rows = async (where: string, params: unknown[]) =>
    (await watch.query<ReadingRow>(pool, { text: `select ${COLUMNS} from readings where ${where} order by ts`, values: params })).rows

  return {
    concurrentWrites: CONCURRENT_WRITES,
    async write(batch) {
      if (batch.length === 0) return
      writing++
      try {
        await write(batch)
      } finally {
        if (--writing === 0) drained?.()
      }
    },
    async attribute(toteId, { deliveryId, rxId, fromMs, toMs }) {
      const to = bound(toMs ?? Infinity)
      return inTransaction(pool, async (client) => {
        // The delivery's rows outside its interval lose it (a backdated end).
        await client.query(
          'update readings set delivery_id = null, rx_id = null where delivery_id = $1 and tote_id = $2 and (ts < $3 or ts >= $4)',
          [deliveryId, toteId, bound(fromMs), to],
        )
        const attached = await client.query(
          'update readings set delivery_id = $1, rx_id = $2 where tote_id = $3 and ts >= $4 and ts < $5 and delivery_id is null',
          [deliveryId, rxId, toteId, bound(fromMs), to],
        )
        return (attached.rowCount ?? 0) > 0
      })
    },
    readingsForDelivery: (deliveryId, fromMs, toMs) =>
      rows('delivery_id = $1 and ts >= $2 and ts < $3', [deliveryId, bound(fromMs), bound(toMs)]),
    async latestForDelivery(deliveryId, fromMs, toMs) {
      const { rows: found } = await watch.query<ReadingRow>(pool, {
        text: `select ${COLUMNS} from readings where delivery_id = $1 and ts >= $2 and ts < $3 order by ts desc limit 1`,
        values: [deliveryId, bound(fromMs), bound(toMs)],
      })
      return found[0] ?? null
    },
    readingsForTote: (toteId, fromMs, toMs) => rows('tote_id = $1 and ts >= $2 and ts < $3', [toteId, bound(fromMs), bound(toMs)]),
    async bucketed(deliveryId, fromMs, toMs, stepMs) {
      assertStep(stepMs)
      const { rows: buckets } = await watch.query<TemperatureBucket>(pool, {
        text: `
        select ts - ts % $4 as t, min(temp_c) as min, max(temp_c) as max, avg(temp_c) as avg, count(*) as n
        from readings where delivery_id = $1 and ts >= $2 and ts < $3
        group by 1 order by 1`,
        values: [deliveryId, bound(fromMs), bound(toMs), stepMs],
      })
      return buckets
    },
    async expire(request) {
      // Months ahead are made here too: the expirer runs every few minutes, long before a month starts.
      await ensureMonthlyPartitions(pool, Date.now(), MONTHS_AHEAD)
      const dropped = dropsLockedOut ? { removed: 0, lockedOut: true } : await expirePartitions(pool, request)
      dropsLockedOut = dropped.lockedOut
      if (dropped.removed >= request.limit) return { removed: dropped.removed, more: true }
      try {
        const batch = await inTransaction(pool, (client) => expireBatch(client, request, request.limit - dropped.removed, resume))
        // A pass ends with a batch that is not full; the next one starts from the beginning.
        if (!batch.full) endPass()
        // A row whose binding changed between pick and delete is left to the next pass, but counts as picked here.
        return { removed: dropped.removed + batch.removed, more: batch.full }
      } catch (error) {
        endPass()
        throw error
      }
    },
    async count() {
      return (await watch.query<{ n: number }>(pool, { text: 'select count(*) as n from readings' })).rows[0]!.n
    },
    async ping() {
      await watch.query(pool, { text: 'select 1' })
    },
    async close() {
      if (writing > 0) await new Promise<void>((resolve) => (drained = resolve))
      await pool.end()
    },
  }
}

// Partitions made ahead of the current month, so a write never lands in the default partition.
const MONTHS_AHEAD = 3

/**
 * Where the next batch of a pass picks its keys from: at or after the last key the batch before
 * it picked, in each pick's index order. Without it every batch walked the index from its start,
 * over the entries of the rows the pass had already deleted (dead until a vacuum) and, for
 * unbound rows, through a bitmap of every expired row: 44 ms of a batch's ~125 ms for 5,000 rows
 * with 670,000 still to go. "At or after", as several rows share a ts: the ones already deleted
 * are passed over, the ones the last batch's limit cut off are picked. A row that becomes expired
 * behind the cursor during the pass (a binding ended backdated) goes in the next pass.
 */
type PassCursor = { unboundTs: number | null; bound: { deliveryId: string; ts: number } | null }
const startOfPass = (): PassCursor => ({ unboundTs: null, bound: null })
/** Below every stored ts, as a bigint parameter. */
const MIN_TS = Number.MIN_SAFE_INTEGER

/**
 * One batch of row deletes: the readings past retention in months that could not be dropped whole.
 * Resolves with the rows removed and whether the batch was full (more may be left); moves `resume`
 * past what it picked.
 *
 * The batch's keys are picked first, bounded by `limit`, in index order from `resume`: unbound
 * rows through their partial index on `ts`, bound ones through the delivery index on
 * `(delivery_id, ts)` (only months past RETENTION_RECORDS_DAYS hold any), and deleted by primary
 * key in the same statement (pickAndDelete), one per kind, the whole batch one transaction. The
 * picked keys are a materialized set of at most `limit` rows that the delete joins to the table
 * by primary key: `limit` index lookups. A delete joined to a condition on the expired rows
 * instead lets the planner size the join from their statistics, which right after a load are far
 * off (1,141 estimated, 800,000 real): it sorted every expired row to delete 5,000 of them (2.3 s,
 * 47 MB spilled to disk; docs/performance.md). The batch's transaction sets three planner
 * settings: JIT off (the delete's estimated cost is over the JIT threshold, and compiling it took
 * ~20 ms of a 45 ms delete), and no bitmap scan or sort, so each pick walks its index in order from
 * the cursor and stops at `limit`. Right after a load the planner expects ~30 expired unbound rows
 * where there are 670,000, and otherwise collects them all in a bitmap and sorts them for the
 * first 5,000 (695 ms, against 10 ms for the index walk).
 *
 * The binding is checked again on each row as it is deleted: it must still be the one it had when
 * picked (READ COMMITTED re-reads a row updated meanwhile before deleting it), so a reading that a
 * concurrent `attribute` bound to a delivery, or moved to another, is not removed in this batch.
 * The check compares the row with its own key's binding (a join condition), not with the cutoffs:
 * a condition on the rows alone would let the planner go back to reading every expired row.
 */
async function expireBatch(
  client: pg.PoolClient,
  { unboundBeforeMs, boundBeforeMs, keepDeliveries }: ExpiryRequest,
  limit: number,
  resume: PassCursor,
) {
  await client.query('set local jit = off; set local enable_bitmapscan = off; set local enable_sort = off')
  // Two picks, each with an index or a partition range to go by (one OR would scan everything).
  const unbound = await pickAndDelete(client, 'delivery_id is null and ts < $1 and ts >= $2', ['ts', 'ts desc'], limit, [
    bound(unboundBeforeMs),
    resume.unboundTs ?? MIN_TS,
  ])
  if (unbound.last) resume.unboundTs = Number(unbound.last.ts)
  if (unbound.picked >= limit) return { removed: unbound.removed, full: true }
  const after = resume.bound ?? { deliveryId: '', ts: MIN_TS }
  const boundPast = await pickAndDelete(
    client,
    'delivery_id is not null and ts < $1 and not (delivery_id = any($2::text[])) and (delivery_id, ts) >= ($3, $4)',
    ['delivery_id, ts', 'delivery_id desc, ts desc'],
    limit - unbound.picked,
    [bound(boundBeforeMs), [...keepDeliveries], after.deliveryId, after.ts],
  )
  if (boundPast.last) resume.bound = { deliveryId: boundPast.last.delivery_id!, ts: Number(boundPast.last.ts) }
  return { removed: unbound.removed + boundPast.removed, full: unbound.picked + boundPast.picked >= limit }
}

/**
 * Picks at most `limit` keys where `expired` holds, in `order` (and its reverse, for the last key
 * picked), and deletes those rows by primary
 * key, in one statement: the keys stay in the server, and the service gets back one row (how many
 * were picked and removed, and the last key picked). When the keys came to the service and went
 * back as arrays, parsing and sending 5,000 of them held its event loop ~10-20 ms a batch, and
 * PUBACK p99 beside a pass was ~3× the p99 without one (bench:expiry --engine postgres).
 * Deleted in (tote_id, ts) order, the order writes lock rows in (see above).
 */
async function pickAndDelete(
  client: pg.PoolClient,
  expired: string,
  [order, reversed]: [string, string],
  limit: number,
  params: unknown[],
) {
  const { rows } = await client.query<{ picked: number; removed: number; delivery_id: string | null; ts: string | null }>(
    `with picked as materialized (
       select tote_id, ts, delivery_id from readings where ${expired} order by ${order} limit ${limit}
     ), gone as (
       delete from readings r using (select * from picked order by tote_id, ts) k
       where r.tote_id = k.tote_id and r.ts = k.ts and r.delivery_id is not distinct from k.delivery_id
       returning 1
     ), last as (
       select delivery_id, ts from picked order by ${reversed} limit 1
     )
     select (select count(*) from picked)::int as picked, (select count(*) from gone)::int as removed, last.delivery_id, last.ts
     from (select 1) one left join last on true`,
    params,
  )
  const { picked, removed, delivery_id, ts } = rows[0]!
  return { picked, removed, last: ts === null ? null : { delivery_id, ts } }
}

async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  let broken: Error | undefined
  try {
    await client.query('begin')
    const result = await work(client)
    await client.query('commit')
    return result
  } catch (error) {
    await client.query('rollback').catch((err: Error) => void (broken = err))
    throw error
  } finally {
    client.release(broken)
  }
}

const byToteThenTs = (a: ReadingRow, b: ReadingRow) => (a.tote_id < b.tote_id ? -1 : a.tote_id > b.tote_id ? 1 : a.ts - b.ts)
// bigint columns: ±Infinity (callers' "unbounded") would not bind.
const bound = (ms: number) => Math.min(Math.max(ms, Number.MIN_SAFE_INTEGER), Number.MAX_SAFE_INTEGER)
