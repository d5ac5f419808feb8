import { sql } from 'kysely'
import type { ColdChainState } from '../../../rules/index.js'
import { coldChainFigures, type ColdChainFigures } from '../../domain/cold-chain.js'
import type { Outbox } from '../../events/outbox.js'
import { recordRuleAlarms } from '../../alarms/alarm-records.js'
import { iso, systemClock, type Clock } from '../../clock.js'
import type { Db, Executor } from '../../store/schema.js'
import type { ReadingSink } from '../../timeseries/sink.js'
import type { ColdChainStore } from './port.js'

// The end of an open delivery's interval: the sink's ranges are half-open and need a number.
const OPEN_END = Number.MAX_SAFE_INTEGER
// Summaries written per UPDATE: one statement instead of one per delivery (a tick under load has
// every bound tote's delivery to save); 100 rows are 300 bound parameters, far below SQLite's and
// PostgreSQL's limits.
const SUMMARIES_PER_STATEMENT = 100
/** Delivery ids per `IN (…)` list when reading saved summaries: well below both engines' parameter limits. */
const IDS_PER_QUERY = 500
/**
 * Reads of stored readings at once (loads and recomputes). They share the sink's connections with
 * the ingest writes, which must not queue behind them: the PostgreSQL sink's pool has one
 * connection beyond its writes in flight (postgres-sink.ts), and a cold start loads a thousand
 * deliveries together. Loads go first: a new delivery's first readings are not acknowledged until
 * it is loaded, while a recompute holds nothing up.
 */
const CONCURRENT_READS = 1

/** The monitor's store (port.ts) on the entity store, the time-series sink and the outbox. */
export function createColdChainStore({
  db,
  sink,
  outbox,
  clock = systemClock,
}: {
  db: Db
  sink: ReadingSink
  outbox: Outbox
  clock?: Clock
}): ColdChainStore {
  return {
    readings: readingsInBinding(db, sink),
    announcedBreak: gathered((ids) => announcedBreaks(db, ids)),
    async save(summaries, events) {
      const messages = await db.transaction().execute(async (trx) => {
        await writeSummaries(trx, summaries)
        // docs/api.md, Alarms: raised and cleared with the events that cause them, or not at all.
        if (events.length) await recordRuleAlarms(trx, events, iso(clock.now()))
        return (await outbox.append(trx, [...events])).messages
      })
      outbox.committed(messages)
    },
  }
}

/**
 * A delivery's readings over its binding interval only, never over all time: on QuestDB a read's
 * `ts` range is the interval it scans, and a scan from 0 grew with the table.
 *
 * The interval is read from the deliveries row at read time, not taken from a caller's cached
 * Binding. Why this never drops a reading of the delivery: a reading carries the delivery only
 * when its ts is in [bound_from, bound_to) (ingest's ToteBindings and the sink's attribute() both
 * take the interval from this row). `bound_from` is written once, by the dispatch, with its own
 * occurred_at (a backdated dispatch included: attribute() then claims the earlier readings with
 * that same value), and nothing moves it afterwards; so no reading of the delivery lies before
 * it. A backdated end only moves `bound_to` earlier, and attribute() takes the readings past it
 * off the delivery: the read, made after that change, wants none of them either. A delivery
 * without `bound_from` was never bound: it has no readings.
 */
function readingsInBinding(db: Db, sink: ReadingSink): ColdChainStore['readings'] {
  const intervalOf = gathered((ids) => bindingIntervals(db, ids))
  const read = limited(CONCURRENT_READS, ({ deliveryId, fromMs, toMs }: { deliveryId: string; fromMs: number; toMs: number }) =>
    sink.readingsForDelivery(deliveryId, fromMs, toMs),
  )
  return async (deliveryId, urgent) => {
    const interval = await intervalOf(deliveryId)
    return interval === null ? [] : read({ deliveryId, ...interval }, urgent)
  }
}

async function bindingIntervals(db: Db, ids: readonly string[]): Promise<Map<string, { fromMs: number; toMs: number }>> {
  const found = new Map<string, { fromMs: number; toMs: number }>()
  for (let i = 0; i < ids.length; i += IDS_PER_QUERY) {
    const rows = await db
      .selectFrom('deliveries')
      .select(['id', 'bound_from', 'bound_to'])
      .where('id', 'in', ids.slice(i, i + IDS_PER_QUERY))
      .where('bound_from', 'is not', null)
      .execute()
    for (const row of rows) {
      found.set(row.id, { fromMs: Date.parse(row.bound_from!), toMs: row.bound_to === null ? OPEN_END : Date.parse(row.bound_to) })
    }
  }
  return found
}

/**
 * One read for every delivery asked for in the same turn of the event loop: a thousand totes'
 * first readings after a start load a thousand deliveries at once, and one query each exhausted
 * the entity store's pool.
 */
function gathered<T>(read: (ids: string[]) => Promise<Map<string, T>>): (id: string) => Promise<T | null> {
  let wanted: { ids: Set<string>; result: Promise<Map<string, T>> } | null = null
  return (id) => {
    if (wanted === null) {
      const ids = new Set<string>()
      const result = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        wanted = null
        return read([...ids])
      })
      wanted = { ids, result }
    }
    wanted.ids.add(id)
    return wanted.result.then((found) => found.get(id) ?? null)
  }
}

/**
 * `task` with at most `parallel` calls running; the others wait their turn, the urgent ones first,
 * each kind in call order.
 */
function limited<A, R>(parallel: number, task: (arg: A) => Promise<R>): (arg: A, urgent: boolean) => Promise<R> {
  let running = 0
  const waiting = { urgent: [] as (() => void)[], other: [] as (() => void)[] }
  return async (arg, urgent) => {
    if (running >= parallel) await new Promise<void>((resolve) => (urgent ? waiting.urgent : waiting.other).push(resolve))
    else running++
    try {
      return await task(arg)
    } finally {
      const next = waiting.urgent.shift() ?? waiting.other.shift()
      if (next) next()
      else running--
    }
  }
}

async function announcedBreaks(db: Db, ids: readonly string[]): Promise<Map<string, NonNullable<ColdChainState['broken']>>> {
  const found = new Map<string, NonNullable<ColdChainState['broken']>>()
  for (let i = 0; i < ids.length; i += IDS_PER_QUERY) {
    const rows = await db
      .selectFrom('deliveries')
      .select(['id', 'cold_chain'])
      .where('id', 'in', ids.slice(i, i + IDS_PER_QUERY))
      .execute()
    for (const row of rows) {
      if (!row.cold_chain) continue
      const saved = JSON.parse(row.cold_chain) as Partial<ColdChainFigures>
      if (saved.break_reason && saved.broken_at) found.set(row.id, { reason: saved.break_reason, at: Date.parse(saved.broken_at) })
    }
  }
  return found
}

/** The deliveries' `cold_chain` columns, SUMMARIES_PER_STATEMENT rows per UPDATE (CASE works on SQLite and PostgreSQL alike). */
async function writeSummaries(trx: Executor, summaries: readonly { deliveryId: string; state: ColdChainState }[]): Promise<void> {
  for (let i = 0; i < summaries.length; i += SUMMARIES_PER_STATEMENT) {
    const chunk = summaries.slice(i, i + SUMMARIES_PER_STATEMENT)
    if (chunk.length === 1) {
      const { deliveryId, state } = chunk[0]!
      await trx
        .updateTable('deliveries')
        .set({ cold_chain: JSON.stringify(coldChainFigures(state)) })
        .where('id', '=', deliveryId)
        .execute()
      continue
    }
    const cases = sql.join(
      chunk.map((s) => sql`WHEN ${s.deliveryId} THEN ${JSON.stringify(coldChainFigures(s.state))}`),
      sql` `,
    )
    await trx
      .updateTable('deliveries')
      .set({ cold_chain: sql<string>`CASE id ${cases} END` })
      .where(
        'id',
        'in',
        chunk.map((s) => s.deliveryId),
      )
      .execute()
  }
}
