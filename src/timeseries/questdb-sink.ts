import { setTimeout as sleep } from 'node:timers/promises'
import { SenderOptions } from '@questdb/nodejs-client'
import { createExec, httpOptionsOf, quote, timestampMicros, type Exec } from './questdb-exec.js'
import { createIlpEncoder } from './questdb-ilp.js'
import { createIlpPost } from './questdb-ilp-post.js'
import { assertStep, type ExpiryRequest, type ExpiryResult, type ReadingRow, type ReadingSink, type TemperatureBucket } from './sink.js'

/**
 * Readings in QuestDB: written over ILP/HTTP (text built in questdb-ilp.ts, posted by
 * questdb-ilp-post.ts, the config string parsed by the official client), read over `/exec`.
 *
 * This adapter keeps every batch until QuestDB has answered 204 for it (the official client's
 * `flush()` would drop the rows of a failed send): each attempt sends the same bytes again,
 * retries on the retriable answers below with
 * exponential backoff and jitter, and rejects once the deadline has passed, whether QuestDB
 * answers errors, refuses connections or never answers — the caller has not acknowledged
 * anything yet, so the tote re-sends.
 * Re-sending is harmless: the table dedups on (ts, tote_id) (DEDUP UPSERT KEYS).
 *
 * A 204 from ILP/HTTP means committed to the WAL; the table shows the rows a moment later, so
 * each read first waits for the writes acknowledged before it to be applied (wal_tables()).
 */

export type RetryPolicy = {
  /**
   * Give up (reject) once this much time has passed since write() was called, waiting behind
   * earlier writes included: during an outage a queue of writes all settle within it.
   */
  deadlineMs: number
  /** First backoff; doubles per attempt up to maxDelayMs, plus up to 20 % jitter. */
  firstDelayMs: number
  maxDelayMs: number
}

export type QuestdbSinkOptions = {
  /** `QUESTDB_CONFIG`, e.g. `http::addr=host:9000;`. Must be http or https. */
  config: string
  /** Table name; tests use one per run. */
  table?: string
  retry?: Partial<RetryPolicy>
  /** Requests in flight at once (see CONCURRENT_WRITES). */
  concurrentWrites?: number
  /** Where retries are reported; defaults to silence. */
  onRetry?: (attempt: number, error: Error, delayMs: number) => void
}

/**
 * 5 s bounds a write whatever QuestDB does (answers errors, refuses connections, never answers):
 * a shutdown waits for the write in progress and must still end within its 10 s, and rejecting
 * is safe — nothing was acknowledged, so the tote sends the readings again when it reconnects.
 */
const DEFAULT_RETRY: RetryPolicy = { deadlineMs: 5_000, firstDelayMs: 100, maxDelayMs: 2_000 }
/**
 * Requests in flight at once. Each group waits for QuestDB's WAL commit (tens of ms under load);
 * four in flight carry 4× the groups per commit latency. More would mostly add partially-filled
 * requests, since GroupCommitter's groups grow while every slot is busy.
 */
const CONCURRENT_WRITES = 4
/** The client's own default for one HTTP request, when the config string names none. */
const CLIENT_REQUEST_TIMEOUT_MS = 10_000

/**
 * Answers worth sending the same batch again for: the client's own list (server errors and
 * gateway timeouts) — anything else, such as 400 for a line QuestDB cannot parse or 401, will
 * fail the same way every time.
 */
const RETRIABLE_STATUS = new Set([500, 503, 504, 507, 509, 523, 524, 529, 599])

function isRetriable(error: Error): boolean {
  const status = /statusCode=(\d+)/.exec(error.message)
  // No status code: the request never got an answer (refused, reset, timed out).
  return status === null ? true : RETRIABLE_STATUS.has(Number(status[1]))
}

const createTable = (table: string) => `
CREATE TABLE IF NOT EXISTS ${table} (
  tote_id SYMBOL,
  delivery_id SYMBOL CAPACITY 65536 NOCACHE,
  rx_id SYMBOL CAPACITY 65536 NOCACHE,
  ts TIMESTAMP,
  temp_c DOUBLE,
  battery DOUBLE,
  humidity DOUBLE,
  lat DOUBLE,
  lng DOUBLE,
  seq LONG,
  received_at TIMESTAMP,
  late BOOLEAN
) TIMESTAMP(ts) PARTITION BY DAY WAL DEDUP UPSERT KEYS(ts, tote_id)`
// delivery_id and rx_id get a large, uncached symbol table: one value per delivery, ever.

export async function createQuestdbSink({
  config,
  table = 'readings',
  retry,
  onRetry,
  concurrentWrites = CONCURRENT_WRITES,
}: QuestdbSinkOptions): Promise<ReadingSink> {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(table)) throw new Error(`invalid QuestDB table name "${table}"`)
  const policy = { ...DEFAULT_RETRY, ...retry }
  const exec = createExec(httpOptionsOf(config))
  await exec(createTable(table))

  const options = await SenderOptions.fromConfig(config, { log: () => {} })
  const post = createIlpPost(options, concurrentWrites)
  const encode = createIlpEncoder(table)
  // Each attempt is one request bounded by request_timeout (and the write's deadline); the
  // retrying, and its deadline, are ours whatever the config string says.
  const requestTimeoutMs = Math.min(options.request_timeout ?? CLIENT_REQUEST_TIMEOUT_MS, policy.deadlineMs)
  // Several requests in flight: QuestDB commits each request to the WAL before it answers, and
  // one request at a time capped ingest at one group per commit (about 3,000 readings/s with
  // PUBACK p99 over half a second against a real server). Which request lands first does not
  // matter: the table dedups on (ts, tote_id), and GroupCommitter acknowledges the groups in the
  // order it made them.
  let free = concurrentWrites
  const waiting: (() => void)[] = []
  const acquire = () =>
    new Promise<void>((resolve) => {
      if (free > 0) {
        free--
        resolve()
      } else waiting.push(resolve)
    })
  const release = () => {
    const next = waiting.shift()
    if (next) next()
    else free++
  }

  // One attempt: one request with the group's text, bounded by the deadline too. A request the
  // deadline cut off may still reach QuestDB: a late 204 only stores rows that the table dedups.
  const sendBefore = (body: Buffer, deadline: number) => post(body, Math.min(requestTimeoutMs, deadline - Date.now()))

  // `body` holds `count` readings; built once, it is sent again by every attempt until QuestDB answers 204.
  const sendUntilAcknowledged = async (body: Buffer, count: number, deadline: number) => {
    if (Date.now() >= deadline)
      throw new Error(
        `QuestDB did not store ${count} readings: the ${policy.deadlineMs} ms deadline passed while earlier writes were being retried`,
      )
    let delay = policy.firstDelayMs
    for (let attempt = 1; ; attempt++) {
      try {
        await sendBefore(body, deadline)
        return
      } catch (err) {
        const error = err instanceof Error ? err : new Error(String(err))
        const wait = delay + Math.random() * delay * 0.2
        if (!isRetriable(error) || Date.now() + wait > deadline) {
          throw new Error(`QuestDB did not store ${count} readings after ${attempt} attempt(s): ${error.message}`, { cause: error })
        }
        onRetry?.(attempt, error, wait)
        await new Promise((resolve) => setTimeout(resolve, wait))
        delay = Math.min(delay * 2, policy.maxDelayMs)
      }
    }
  }

  const inFlight = new Set<Promise<unknown>>()
  // A 204 means committed to the WAL; QuestDB applies it to the table a moment later. Each read
  // first waits until every write acknowledged before it is applied, so a read after a write
  // sees it (the monitor rebuilds rule state from reads right after commits).
  let acknowledged = 0
  let applied = 0
  const caughtUp = async () => {
    const through = acknowledged
    if (applied >= through) return
    await walApplied(exec, table)
    applied = Math.max(applied, through)
  }
  const reads = createReads(exec, table)

  return {
    concurrentWrites,
    async write(rows) {
      if (rows.length === 0) return
      const deadline = Date.now() + policy.deadlineMs
      const body = encode(rows) // our own copy of the rows, kept until acknowledged
      await acquire()
      const done = sendUntilAcknowledged(body, rows.length, deadline).finally(release)
      const tracked = done.catch(() => {})
      inFlight.add(tracked)
      void tracked.then(() => inFlight.delete(tracked))
      await done
      acknowledged += 1
    },
    attribute: async (toteId, binding) => (await caughtUp(), reads.attribute(toteId, binding)),
    readingsForDelivery: async (deliveryId, fromMs, toMs) => (await caughtUp(), reads.readingsForDelivery(deliveryId, fromMs, toMs)),
    latestForDelivery: async (deliveryId, fromMs, toMs) => (await caughtUp(), reads.latestForDelivery(deliveryId, fromMs, toMs)),
    bucketed: async (deliveryId, fromMs, toMs, stepMs) => (await caughtUp(), reads.bucketed(deliveryId, fromMs, toMs, stepMs)),
    readingsForTote: async (toteId, fromMs, toMs) => (await caughtUp(), reads.readingsForTote(toteId, fromMs, toMs)),
    count: async () => (await caughtUp(), reads.count()),
    ping: () => reads.ping(),
    expire: async (request) => (await caughtUp(), expireDays(exec, table, request)),
    async close() {
      while (inFlight.size > 0) await Promise.all(inFlight)
      post.close()
    },
  }
}

type Reads = Omit<ReadingSink, 'write' | 'close'>

function createReads(exec: Exec, table: string): Reads {
  // Timestamps come back as epoch ms; `x - x % step` is exact whether QuestDB divides longs as
  // integers or not.
  const ms = (column: string) => `cast(${column} AS LONG) / 1000`
  // `LIMIT -1`: QuestDB's last row of the result, read from the end of the ts-ordered table.
  const rowsWhere = async (where: string, last = false) => {
    const { dataset } = await exec(`
      SELECT tote_id, delivery_id, rx_id, ${ms('ts')} AS ts_ms, temp_c, battery, humidity, lat, lng, seq,
             ${ms('received_at')} AS received_ms, late
      FROM ${table} WHERE ${where} ORDER BY ts${last ? ' LIMIT -1' : ''}`)
    return dataset.map(toRow)
  }
  const within = (fromMs: number, toMs: number) => `ts >= ${timestampMicros(fromMs)} AND ts < ${timestampMicros(toMs)}`

  return {
    async attribute(toteId, { deliveryId, rxId, fromMs, toMs }) {
      // UPDATE rewrites the partitions it touches: run one only when a row would change. Rows
      // before fromMs never had this delivery (writes bind by interval, and a dispatch's
      // occurred_at does not move), so only an end can take rows back.
      const tote = `tote_id = ${quote(toteId)}`
      const count = async (where: string) => Number((await exec(`SELECT count() FROM ${table} WHERE ${where}`)).dataset[0]?.[0] ?? 0)
      let updated = false
      if (toMs !== null) {
        const after = `${tote} AND delivery_id = ${quote(deliveryId)} AND ts >= ${timestampMicros(toMs)}`
        if ((await count(after)) > 0) {
          await exec(`UPDATE ${table} SET delivery_id = NULL, rx_id = NULL WHERE ${after}`)
          updated = true
        }
      }
      const unattributed = `${tote} AND delivery_id IS NULL AND ${toMs === null ? `ts >= ${timestampMicros(fromMs)}` : within(fromMs, toMs)}`
      const attached = (await count(unattributed)) > 0
      if (attached) {
        await exec(`UPDATE ${table} SET delivery_id = ${quote(deliveryId)}, rx_id = ${quote(rxId)} WHERE ${unattributed}`)
        updated = true
      }
      if (updated) await walApplied(exec, table) // the monitor reads the delivery's rows next
      return attached
    },
    readingsForDelivery: (deliveryId, fromMs, toMs) => rowsWhere(`delivery_id = ${quote(deliveryId)} AND ${within(fromMs, toMs)}`),
    latestForDelivery: async (deliveryId, fromMs, toMs) =>
      (await rowsWhere(`delivery_id = ${quote(deliveryId)} AND ${within(fromMs, toMs)}`, true))[0] ?? null,
    readingsForTote: (toteId, fromMs, toMs) => rowsWhere(`tote_id = ${quote(toteId)} AND ${within(fromMs, toMs)}`),
    async bucketed(deliveryId, fromMs, toMs, stepMs) {
      assertStep(stepMs)
      const { dataset } = await exec(`
        SELECT ${ms('ts')} - ${ms('ts')} % ${stepMs} AS t, min(temp_c), max(temp_c), avg(temp_c), count()
        FROM ${table} WHERE delivery_id = ${quote(deliveryId)} AND ${within(fromMs, toMs)}
        ORDER BY t`)
      return dataset.map(([t, min, max, avg, n]): TemperatureBucket => ({
        t: Number(t),
        min: Number(min),
        max: Number(max),
        avg: Number(avg),
        n: Number(n),
      }))
    },
    async count() {
      const { dataset } = await exec(`SELECT count() FROM ${table}`)
      return Number(dataset[0]?.[0] ?? 0)
    },
    async ping() {
      await exec('SELECT 1')
    },
  }
}

const DAY_MS = 86_400_000
const startOfDay = (ms: number) => ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS)
// Kept deliveries named in one query: a URL of a few KiB, well inside QuestDB's request header buffer.
const IDS_PER_QUERY = 200

/**
 * Retention on QuestDB (docs/operations.md, Retention): QuestDB has no row DELETE, and the table
 * is partitioned by day, so whole days go, one per call, with `ALTER TABLE … DROP PARTITION`: the
 * days before both cutoffs and before the first day that holds a reading of a kept delivery.
 * Readings bound to no delivery therefore live as long as their day (RETENTION_RECORDS_DAYS).
 */
async function expireDays(
  exec: Exec,
  table: string,
  { unboundBeforeMs, boundBeforeMs, keepDeliveries }: ExpiryRequest,
): Promise<ExpiryResult> {
  const micros = async (query: string) => {
    const value = (await exec(query)).dataset[0]?.[0]
    return value === null || value === undefined ? null : Number(value) / 1_000
  }
  let before = startOfDay(Math.min(unboundBeforeMs, boundBeforeMs))
  const keep = [...keepDeliveries]
  for (let i = 0; i < keep.length; i += IDS_PER_QUERY) {
    const ids = keep
      .slice(i, i + IDS_PER_QUERY)
      .map(quote)
      .join(', ')
    const first = await micros(
      `SELECT min(cast(ts AS LONG)) FROM ${table} WHERE ts < ${timestampMicros(before)} AND delivery_id IN (${ids})`,
    )
    if (first !== null) before = Math.min(before, startOfDay(first))
  }
  const oldest = await micros(`SELECT min(cast(ts AS LONG)) FROM ${table}`)
  if (oldest === null || oldest >= before) return { removed: 0, more: false }
  const upTo = Math.min(before, startOfDay(oldest) + DAY_MS)
  const removed = Number((await exec(`SELECT count() FROM ${table} WHERE ts < ${timestampMicros(upTo)}`)).dataset[0]?.[0] ?? 0)
  await exec(`ALTER TABLE ${table} DROP PARTITION WHERE ts < ${timestampMicros(upTo)}`)
  await walApplied(exec, table)
  return { removed, more: upTo < before }
}

/**
 * Resolves once QuestDB has applied every transaction committed to `table` so far, so reads show
 * them (`wal_tables()`: writerTxn catches up with sequencerTxn). Rejects at once for a suspended
 * table (it applies nothing until an operator resumes it) and after `timeoutMs` otherwise.
 */
async function walApplied(exec: Exec, table: string, timeoutMs = 10_000): Promise<void> {
  const status = async () =>
    (await exec(`SELECT writerTxn, sequencerTxn, suspended FROM wal_tables() WHERE name = ${quote(table)}`)).dataset[0]
  const first = await status()
  if (first === undefined) return // not a WAL table: reads see writes at once
  const committed = Number(first[1])
  const deadline = Date.now() + timeoutMs
  for (let row = first; ; row = (await status()) ?? [committed, committed, false]) {
    if (Number(row[0]) >= committed) return
    if (row[2] === true)
      throw new Error(`QuestDB table ${table} is suspended: its writes are not applied (ALTER TABLE ${table} RESUME WAL)`)
    if (Date.now() > deadline)
      throw new Error(`QuestDB has not applied ${table}'s WAL (writerTxn ${row[0]} < ${committed}) within ${timeoutMs} ms`)
    await sleep(50)
  }
}

function toRow(v: unknown[]): ReadingRow {
  const num = (x: unknown) => (x === null || x === undefined ? null : Number(x))
  return {
    tote_id: String(v[0]),
    delivery_id: (v[1] as string | null) ?? null,
    rx_id: (v[2] as string | null) ?? null,
    ts: Number(v[3]),
    temp_c: Number(v[4]),
    battery: num(v[5]),
    humidity: num(v[6]),
    lat: num(v[7]),
    lng: num(v[8]),
    seq: num(v[9]),
    received_at: Number(v[10]),
    late: v[11] === true,
  }
}
