import { sql } from 'kysely'
import type { Executor } from '../store/schema.js'

/** What these steps read of an event (outbox.ts NewEvent). */
type Batched = { delivery_id?: string | null | undefined; dedupe_key?: string | undefined; seq?: number | undefined }

/** Deliveries (or dedupe keys) per statement: far below SQLite's and PostgreSQL's parameter limits. */
const PER_STATEMENT = 250

/**
 * The events to write: those whose (delivery, dedupe key) is not stored yet, nor taken by an
 * earlier event of the same batch. One read per PER_STATEMENT events instead of one per event.
 */
export async function withoutStored<E extends Batched>(trx: Executor, events: readonly E[]): Promise<E[]> {
  const keyed = events.filter((e) => e.dedupe_key && e.delivery_id)
  const seen = new Set<string>()
  for (let i = 0; i < keyed.length; i += PER_STATEMENT) {
    const chunk = keyed.slice(i, i + PER_STATEMENT)
    const rows = await trx
      .selectFrom('events')
      .select(['delivery_id', 'dedupe_key'])
      .where('delivery_id', 'in', [...new Set(chunk.map((e) => e.delivery_id!))])
      .where('dedupe_key', 'in', [...new Set(chunk.map((e) => e.dedupe_key!))])
      .execute()
    for (const row of rows) seen.add(keyOf(row.delivery_id!, row.dedupe_key!))
  }
  const fresh: E[] = []
  for (const event of events) {
    if (event.dedupe_key && event.delivery_id) {
      const key = keyOf(event.delivery_id, event.dedupe_key)
      if (seen.has(key)) continue
      seen.add(key)
    }
    fresh.push(event)
  }
  return fresh
}

/**
 * Each event's number in its delivery (`seq`): the caller's when given, else the delivery's
 * counter advanced by as many events as it gets here, in one UPDATE per PER_STATEMENT deliveries.
 * Events of one delivery are numbered in the order given, as appending them one by one would.
 */
export async function takeSeqs(trx: Executor, events: readonly Batched[]): Promise<(number | null)[]> {
  const counts = new Map<string, number>()
  for (const e of events) if (e.seq === undefined && e.delivery_id) counts.set(e.delivery_id, (counts.get(e.delivery_id) ?? 0) + 1)
  const next = new Map<string, number>()
  const ids = [...counts.keys()]
  for (let i = 0; i < ids.length; i += PER_STATEMENT) {
    const chunk = ids.slice(i, i + PER_STATEMENT)
    // cast: PostgreSQL types a CASE of bare parameters as text, which integer + would refuse.
    const cases = sql.join(
      chunk.map((id) => sql`WHEN ${id} THEN CAST(${counts.get(id)!} AS integer)`),
      sql` `,
    )
    const rows = await trx
      .updateTable('deliveries')
      .set({ event_seq: sql`event_seq + CASE id ${cases} END` })
      .where('id', 'in', chunk)
      .returning(['id', 'event_seq'])
      .execute()
    for (const row of rows) next.set(row.id, row.event_seq - counts.get(row.id)! + 1)
  }
  return events.map((e) => {
    if (e.seq !== undefined) return e.seq
    if (!e.delivery_id) return null
    const seq = next.get(e.delivery_id)
    if (seq === undefined) throw new Error(`no delivery ${e.delivery_id} to number its event`)
    next.set(e.delivery_id, seq + 1)
    return seq
  })
}

const keyOf = (deliveryId: string, dedupeKey: string) => `${deliveryId}\n${dedupeKey}`
