import type pg from 'pg'
import type { ExpiryRequest } from './sink.js'

/**
 * The PostgreSQL `readings` table is partitioned by RANGE of `ts` (epoch ms), one partition per
 * UTC month, `readings_pYYYYMM` (migration 0061). Readings with a `ts` no month partition covers
 * (a sensor clock years off, or a month not made yet) land in `readings_default`; the expirer
 * makes the coming months ahead of time, so in normal running that partition stays empty.
 *
 * Why months: a pharmacy chain's 14 million readings a day make ~420 M rows a month, a table
 * PostgreSQL handles well; days would make ~2,200 partitions over the 6-year records window, and
 * planning a query over many partitions costs per partition.
 */

const NAME = /^readings_p(\d{4})(\d{2})$/

/** The partition holding `ms`'s month, and its bounds. */
function monthOf(ms: number): { name: string; fromMs: number; toMs: number } {
  const d = new Date(ms)
  const y = d.getUTCFullYear()
  const m = d.getUTCMonth()
  return { name: `readings_p${y}${String(m + 1).padStart(2, '0')}`, fromMs: Date.UTC(y, m, 1), toMs: Date.UTC(y, m + 1, 1) }
}

/** The month partitions that exist, oldest first, with their bounds (taken from their names). */
export async function monthPartitions(db: pg.Pool | pg.PoolClient): Promise<{ name: string; fromMs: number; toMs: number }[]> {
  const { rows } = await db.query<{ name: string }>(
    `select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
     where i.inhparent = 'readings'::regclass order by 1`,
  )
  return rows.flatMap(({ name }) => {
    const match = NAME.exec(name)
    return match ? [monthOf(Date.UTC(Number(match[1]), Number(match[2]) - 1, 1))] : []
  })
}

/**
 * Makes the partitions of the months from `fromMs`'s to `ahead` months after `nowMs`'s that do
 * not exist yet, and resolves with their names. A month whose rows already sit in the default
 * partition cannot be made (PostgreSQL refuses the overlap, 23514): it is left there, where its
 * rows are still read and expired, only without pruning. Another copy making the same month at
 * the same moment is no error.
 */
export async function ensureMonthlyPartitions(
  db: pg.Pool | pg.PoolClient,
  nowMs: number,
  ahead: number,
  fromMs = nowMs,
): Promise<string[]> {
  const have = new Set((await monthPartitions(db)).map((p) => p.name))
  const made: string[] = []
  const until = addMonths(nowMs, ahead)
  for (let month = monthOf(Math.min(fromMs, nowMs)); month.fromMs < until; month = monthOf(month.toMs)) {
    if (have.has(month.name)) continue
    try {
      await db.query(`create table if not exists ${month.name} partition of readings for values from (${month.fromMs}) to (${month.toMs})`)
      made.push(month.name)
    } catch (error) {
      if (!['23514', '42P07', '23505'].includes((error as { code?: string }).code ?? '')) throw error
    }
  }
  return made
}

// Months made for a write reach back at most this far (10 years, past the 6-year records window)
// and MONTHS_AHEAD ahead: a sensor clock further off lands in the default partition, not in
// hundreds of new tables.
const MONTHS_BACK = 120

/**
 * What a sink keeps to make the month partitions a write needs (a backfill of history, a month
 * that just began) before its rows arrive, in one list query and at most one DDL per new month.
 * A write inside the months known to exist costs two comparisons.
 */
export function monthCover(pool: pg.Pool, ahead: number) {
  let covered: { fromMs: number; toMs: number } | null = null
  let pending: Promise<void> | null = null
  const refresh = async (minTs: number) => {
    const now = Date.now()
    const floor = monthOf(now - MONTHS_BACK * 31 * 86_400_000).fromMs
    const from = Math.max(minTs, floor)
    await ensureMonthlyPartitions(pool, now, ahead, from)
    // Every month from `from`'s to `ahead` after now exists now; older than the floor is the default partition's.
    covered = { fromMs: minTs < floor ? -Infinity : monthOf(from).fromMs, toMs: addMonths(now, ahead) }
  }
  return async (rows: readonly { ts: number }[]) => {
    let minTs = Infinity
    let maxTs = -Infinity
    for (const { ts } of rows) {
      if (ts < minTs) minTs = ts
      if (ts > maxTs) maxTs = ts
    }
    // Twice at most: a refresh under way may have been for another write's months. A ts past the
    // months made ahead simply lands in the default partition.
    for (let tries = 0; tries < 2 && !(covered && minTs >= covered.fromMs && maxTs < covered.toMs); tries++) {
      pending ??= refresh(minTs).finally(() => (pending = null))
      await pending
    }
  }
}

/** The start of the month after the `n`th month after `ms`'s (so that month is covered whole). */
const addMonths = (ms: number, n: number) => {
  const d = new Date(ms)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + n + 1, 1)
}

/**
 * Drops whole months with nothing to keep: every reading in them is past both windows
 * (the month ends before both cutoffs) and none is a kept delivery's (open, or ended inside its
 * retention: checked through the delivery index). Resolves with an estimate of the rows dropped
 * (the planner's count: counting a month row by row would cost what the drop saves) and whether
 * a drop gave up waiting for its locks.
 *
 * A month is decided under its own exclusive lock, in the transaction that drops it: the lock
 * waits for the writes and reads of that month in flight and holds off new ones, and the month is
 * then checked again, so a kept delivery's reading stored after the first check (a tote's late
 * upload, in flight while the pass looked) is never dropped with it. The drop then takes
 * PostgreSQL's exclusive lock on `readings` for a moment. `lock_timeout` keeps the writes of other
 * months from queueing behind either lock for long: a month whose locks do not come within it is
 * left to row deletes, and `lockedOut` tells the caller to try no more drops in this pass (a long
 * read of the table, a backup, would otherwise stall every write once per batch).
 */
export async function expirePartitions(
  pool: pg.Pool,
  { unboundBeforeMs, boundBeforeMs, keepDeliveries }: ExpiryRequest,
): Promise<{ removed: number; dropped: string[]; lockedOut: boolean }> {
  const before = Math.min(unboundBeforeMs, boundBeforeMs)
  const keep = [...keepDeliveries]
  const holdsKept = async (db: pg.Pool | pg.PoolClient, month: string) =>
    ((await db.query(`select 1 from ${month} where delivery_id = any($1::text[]) limit 1`, [keep])).rowCount ?? 0) > 0
  let removed = 0
  const dropped: string[] = []
  for (const month of await monthPartitions(pool)) {
    if (month.toMs > before) break
    if (await holdsKept(pool, month.name)) continue
    const client = await pool.connect()
    try {
      await client.query('begin')
      await client.query(`set local lock_timeout = '100ms'`)
      await client.query(`lock table ${month.name} in access exclusive mode`)
      if (await holdsKept(client, month.name)) {
        await client.query('rollback')
        continue
      }
      // The planner's count, fresh: ANALYZE samples the month (a bounded cost, once per month
      // dropped). Its stored count may be none yet, or stale after late writes or row deletes of
      // earlier batches, which would then be counted twice.
      await client.query(`analyze ${month.name}`)
      const { rows } = await client.query<{ n: string }>(
        `select greatest(reltuples, 0)::bigint as n from pg_class where oid = $1::regclass`,
        [month.name],
      )
      await client.query(`drop table ${month.name}`)
      await client.query('commit')
      removed += Number(rows[0]?.n ?? 0)
      dropped.push(month.name)
    } catch (error) {
      await client.query('rollback').catch(() => {})
      if ((error as { code?: string }).code !== '55P03') throw error
      return { removed, dropped, lockedOut: true } // lock_not_available
    } finally {
      client.release()
    }
  }
  return { removed, dropped, lockedOut: false }
}
