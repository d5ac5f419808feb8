import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import type { Db } from '../store/schema.js'

/**
 * Which copy of the service evaluates a delivery's readings right now, when several copies share
 * one PostgreSQL (`rule_leases`, migration 0009). The rule engine keeps a delivery's state in the
 * memory of one process, and its events must come out once and in a deterministic order: so one
 * copy at a time holds a delivery's lease, evaluates every reading of it (its own, and those the
 * other copies forward, see ColdChainMonitor.acceptForwarded) and renews the lease every tick.
 *
 * A lease runs out LEASE_TTL_MS after its last renewal, by the database's clock (the copies'
 * clocks may differ). A copy that dies stops renewing; another copy takes the lease on its next
 * tick after that and rebuilds the delivery's state from the stored readings, re-raising what the
 * dead copy may not have written (the outbox keeps one event per dedupe key). A copy that stops
 * gracefully releases its leases, so the others take over on their next tick.
 */

/**
 * How long a lease outlives its holder's last renewal. Renewals come every tick (1 s): five
 * missed in a row (an event loop stalled that long, or a copy gone) hand the delivery over. With
 * the takeover on the survivor's next tick, a dead copy's deliveries are evaluated again within
 * about 6 s plus the time to read their readings back: inside the 10 s the operations promise.
 */
const LEASE_TTL_MS = 5_000

const dbNowMs = sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint`

export class EvaluationLeases {
  /** This process's name in `rule_leases.holder`: host, pid and a random part (pids repeat across restarts). */
  readonly holder = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`

  constructor(
    private readonly db: Db,
    private readonly ttlMs = LEASE_TTL_MS,
  ) {}

  /**
   * Takes the leases of these deliveries that are free, run out, or already ours (renewing those);
   * resolves with the ids this copy holds afterwards.
   */
  async acquire(deliveryIds: readonly string[]): Promise<Set<string>> {
    if (deliveryIds.length === 0) return new Set()
    const { rows } = await sql<{ delivery_id: string }>`
      insert into rule_leases (delivery_id, holder, expires_at)
      select id, ${this.holder}, ${dbNowMs} + ${this.ttlMs} from unnest(${[...deliveryIds]}::text[]) as id
      on conflict (delivery_id) do update set holder = excluded.holder, expires_at = excluded.expires_at
        where rule_leases.holder = excluded.holder or rule_leases.expires_at < ${dbNowMs}
      returning delivery_id`.execute(this.db)
    return new Set(rows.map((r) => r.delivery_id))
  }

  /**
   * Extends every lease this copy holds; resolves with their ids. A lease that ran out and was
   * taken by another copy is not among them; one that ran out unclaimed is still ours (nobody
   * evaluated the delivery meanwhile) and is renewed.
   */
  async renew(): Promise<Set<string>> {
    const { rows } = await sql<{ delivery_id: string }>`
      update rule_leases set expires_at = ${dbNowMs} + ${this.ttlMs}
      where holder = ${this.holder}
      returning delivery_id`.execute(this.db)
    return new Set(rows.map((r) => r.delivery_id))
  }

  private wanted: { ids: Set<string>; result: Promise<Set<string>> } | null = null

  /**
   * acquire() for one delivery, gathered with the others asked for in the same turn of the event
   * loop into one statement: a thousand totes' first readings after a start load a thousand
   * deliveries at once, and one query each would queue for the pool's connections.
   */
  acquireOne(deliveryId: string): Promise<boolean> {
    if (this.wanted === null) {
      const ids = new Set<string>()
      const result = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.wanted = null
        return this.acquire([...ids])
      })
      this.wanted = { ids, result }
    }
    this.wanted.ids.add(deliveryId)
    return this.wanted.result.then((held) => held.has(deliveryId))
  }

  /** Gives leases up (a delivery ended, or this copy stops): another copy may take them at once. */
  async release(deliveryIds?: readonly string[]): Promise<void> {
    if (deliveryIds?.length === 0) return
    const only = deliveryIds ? sql`and delivery_id = any(${[...deliveryIds]}::text[])` : sql``
    await sql`delete from rule_leases where holder = ${this.holder} ${only}`.execute(this.db)
  }
}
