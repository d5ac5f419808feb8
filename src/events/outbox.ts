import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { newId } from '../ids.js'
import { insertRow, insertRows } from '../store/precompiled.js'
import type { Database, Executor } from '../store/schema.js'
import { sql } from 'kysely'
import { enqueueForEndpoints, enqueueManyForEndpoints } from './fanout.js'
import { takeSeqs, withoutStored } from './outbox-batch.js'

/** The event envelope (src/webhooks/README.md), as webhooks deliver it and GET /v1/events lists it. */
export type EventEnvelope = {
  id: string
  type: string
  created_at: string
  api_version: 'v1'
  pharmacy_id: string | null
  fleet_id?: string | null
  delivery_id?: string | null
  rx_id?: string | null
  seq: number | null
  data: Record<string, unknown>
}

export type Appended = { events: EventEnvelope[]; messages: number }

export type NewEvent = {
  type: string
  pharmacy_id: string | null
  fleet_id?: string | null
  delivery_id?: string | null
  rx_id?: string | null
  data: Record<string, unknown>
  /** Set for events a replay could raise again (rule events): the store keeps one per delivery and key. */
  dedupe_key?: string
  /**
   * The delivery's event number when the caller already knows it: a delivery inserted in this
   * transaction with `event_seq = 1` has its first event numbered 1, which saves reading the
   * counter back. Otherwise the delivery's counter is incremented.
   */
  seq?: number
}

/**
 * The transactional outbox: events are inserted in the transaction of the change that causes
 * them, numbered per delivery, and `committed()` wakes whoever delivers them.
 */
export class Outbox {
  private readonly listeners: Array<() => void> = []
  private readonly commitListeners: Array<() => void> = []

  constructor(
    private readonly clock: Clock,
    /**
     * Events that follow from others, written with them in the same transaction (the
     * `patient.notify` of a dispatch, src/services/patient-notices.ts); none by default.
     */
    private readonly alongside: (trx: Executor, events: readonly NewEvent[]) => Promise<NewEvent[]> = async () => [],
  ) {}

  /**
   * Writes the events and their webhook messages in `trx`. The returned count of messages is
   * this transaction's own: pass it to `committed()` once the transaction has committed.
   */
  async append(trx: Executor, given: NewEvent[]): Promise<Appended> {
    const following = await this.alongside(trx, given)
    const events = following.length ? [...given, ...following] : given
    if (events.length > 1) return this.appendMany(trx, events)
    const appended: EventEnvelope[] = []
    let messages = 0
    for (const event of events) {
      if (event.dedupe_key && event.delivery_id) {
        const seen = await trx
          .selectFrom('events')
          .select('id')
          .where('delivery_id', '=', event.delivery_id)
          .where('dedupe_key', '=', event.dedupe_key)
          .executeTakeFirst()
        if (seen) continue
      }
      const seq = event.seq ?? (event.delivery_id ? await nextSeq(trx, event.delivery_id) : null)
      const envelope = envelopeOf(event, seq, iso(this.clock.now()))
      await insertRow(trx, 'events', eventRow(envelope, event.dedupe_key))
      messages += await enqueueForEndpoints(trx, envelope, this.clock.now())
      appended.push(envelope)
    }
    return { events: appended, messages }
  }

  /**
   * append() for several events (the cold-chain monitor's saves carry dozens under load): the same
   * outcome in a fixed number of statements instead of four or five per event, each a round trip
   * inside the transaction (outbox-batch.ts: stored dedupe keys, delivery counters; then one insert
   * of the events and one of their webhook messages).
   */
  private async appendMany(trx: Executor, events: readonly NewEvent[]): Promise<Appended> {
    const fresh = await withoutStored(trx, events)
    const seqs = await takeSeqs(trx, fresh)
    const now = this.clock.now()
    const createdAt = iso(now)
    const appended = fresh.map((event, i) => envelopeOf(event, seqs[i]!, createdAt))
    await insertRows(
      trx,
      'events',
      appended.map((envelope, i) => eventRow(envelope, fresh[i]!.dedupe_key)),
    )
    return { events: appended, messages: await enqueueManyForEndpoints(trx, appended, now) }
  }

  /**
   * Call after a transaction that appended events (and queued `messages` webhook messages) has
   * committed, with 0 messages too. Only then is there something new to deliver: counted per
   * transaction, so concurrent transactions cannot consume each other's wake-up.
   */
  committed(messages: number): void {
    for (const listener of this.commitListeners) listener()
    if (messages > 0) for (const listener of this.listeners) listener()
  }

  /** Woken after a transaction that queued webhook messages has committed (the dispatcher). */
  onCommitted(listener: () => void): void {
    this.listeners.push(listener)
  }

  /**
   * Woken after every transaction that may have written events has committed, messages or not
   * (the live event streams read the feed then). A wake-up without a new event costs one read.
   */
  onAnyCommit(listener: () => void): void {
    this.commitListeners.push(listener)
  }
}

function envelopeOf(event: NewEvent, seq: number | null, createdAt: string): EventEnvelope {
  return {
    id: newId('evt'),
    type: event.type,
    created_at: createdAt,
    api_version: 'v1',
    pharmacy_id: event.pharmacy_id,
    fleet_id: event.fleet_id ?? null,
    delivery_id: event.delivery_id ?? null,
    rx_id: event.rx_id ?? null,
    seq,
    data: event.data,
  }
}

/** An envelope as the `events` table stores it. */
function eventRow(envelope: EventEnvelope, dedupeKey: string | null | undefined) {
  return {
    id: envelope.id,
    type: envelope.type,
    created_at: envelope.created_at,
    pharmacy_id: envelope.pharmacy_id,
    fleet_id: envelope.fleet_id,
    delivery_id: envelope.delivery_id,
    rx_id: envelope.rx_id,
    seq: envelope.seq,
    data: JSON.stringify(envelope.data),
    dedupe_key: dedupeKey ?? null,
  }
}

async function nextSeq(trx: Executor, deliveryId: string): Promise<number> {
  const row = await trx
    .updateTable('deliveries')
    .set({ event_seq: sql`event_seq + 1` })
    .where('id', '=', deliveryId)
    .returning('event_seq')
    .executeTakeFirstOrThrow()
  return row.event_seq
}

export function envelopeFromRow(row: Omit<Database['events'], 'pos' | 'dedupe_key'>): EventEnvelope {
  return {
    id: row.id,
    type: row.type,
    created_at: row.created_at,
    api_version: 'v1',
    pharmacy_id: row.pharmacy_id,
    fleet_id: row.fleet_id,
    delivery_id: row.delivery_id,
    rx_id: row.rx_id,
    seq: row.seq,
    data: JSON.parse(row.data),
  }
}
