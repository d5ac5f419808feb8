import type { TemperatureProfile } from '../../rules/profile.js'
import type { Clock } from '../clock.js'
import type { Db } from '../store/schema.js'
import { judgedProfile } from './judged-profile.js'

/** A tote's trip with one delivery: from the dispatch's occurred_at to the end's (docs/api.md, `occurred_at`). */
export type Binding = {
  deliveryId: string
  rxId: string
  pharmacyId: string
  fleetId: string | null
  /** Null when the delivery needs no cold chain: readings are stored, not judged. */
  profile: TemperatureProfile | null
  fromMs: number
  /** Null while the delivery is open. */
  toMs: number | null
}

type Entry = { loadedAt: number; usedAt: number; bindings: Binding[] }
type Waiter = { resolve: (bindings: Binding[]) => void; reject: (error: unknown) => void }

// Another instance may dispatch or end a delivery (PostgreSQL deployments); this bounds how long
// a cached interval can be stale. Changes made by this process invalidate at once.
const CACHE_TTL_MS = 2_000
// When one tote's entry expires, every entry older than this that was used within the TTL is
// reloaded in the same query, so under load the cache refreshes in one big read per TTL instead
// of one read per tote per TTL (1,000 publishing totes were 500 queries/s). Entries unused for a
// TTL are dropped instead: a silent tote costs nothing.
const REFRESH_WITH_MS = CACHE_TTL_MS / 2
// That sweep walks the whole cache, so it runs at most this often: a read per socket read, each
// walking 20,000 entries, was quadratic (20,000 totes connecting at once stalled ingest for 16 s).
// Freshness does not depend on it: `cached()` checks every entry's age.
const SWEEP_EVERY_MS = REFRESH_WITH_MS / 2
/** Tote ids per `IN (…)` list: well below SQLite's 32,766 and PostgreSQL's 65,535 parameters. */
const TOTES_PER_QUERY = 500

/**
 * Which delivery a reading belongs to, by its own timestamp (event time), so an hour of
 * buffered readings uploaded late lands on the right delivery.
 */
export class ToteBindings {
  private readonly cache = new Map<string, Entry>()
  /** Totes whose bindings the next read fetches, with whoever waits for them. */
  private wanted = new Map<string, Waiter[]>()
  /** The read in flight, if any (read()). */
  private reading: Promise<void> | null = null
  private generation = 0
  private sweptAt = -Infinity

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** The tote's bindings when the cached copy is fresh enough; undefined when it must be read (forTote). */
  cached(toteId: string): Binding[] | undefined {
    const cached = this.cache.get(toteId)
    if (cached === undefined) return undefined
    const now = this.clock.now()
    cached.usedAt = now
    return now - cached.loadedAt < CACHE_TTL_MS ? cached.bindings : undefined
  }

  async forTote(toteId: string): Promise<Binding[]> {
    return (
      this.cached(toteId) ??
      new Promise<Binding[]>((resolve, reject) => {
        const waiters = this.wanted.get(toteId)
        if (waiters) return waiters.push({ resolve, reject })
        this.wanted.set(toteId, [{ resolve, reject }])
        // The publishes of one socket read arrive together: gather their totes into one query.
        if (this.wanted.size === 1 && this.reading === null) queueMicrotask(() => this.read())
      })
    )
  }

  /** Called when this process binds or releases a tote. */
  invalidate(toteId: string): void {
    this.cache.delete(toteId)
    this.generation++ // a read in flight may predate the change: it must not be cached
  }

  /**
   * One read at a time: the totes missed meanwhile wait for the next, which starts as this one
   * ends. Concurrent reads each refreshed every stale entry, so under load (a read slower than the
   * refresh period) they multiplied until the event loop did little else.
   */
  private read(): void {
    if (this.reading !== null || this.wanted.size === 0) return
    this.reading = this.load().finally(() => {
      this.reading = null
      this.read()
    })
  }

  private async load(): Promise<void> {
    const wanted = this.wanted
    this.wanted = new Map()
    const now = this.clock.now()
    const ids = [...wanted.keys()]
    if (now - this.sweptAt >= SWEEP_EVERY_MS) {
      this.sweptAt = now
      for (const [toteId, entry] of this.cache) {
        if (wanted.has(toteId) || now - entry.loadedAt < REFRESH_WITH_MS) continue
        if (now - entry.usedAt < CACHE_TTL_MS) ids.push(toteId)
        else if (now - entry.loadedAt >= CACHE_TTL_MS) this.cache.delete(toteId)
      }
    }
    const generation = this.generation
    try {
      const byTote = new Map<string, Binding[]>(ids.map((id) => [id, []]))
      for (let i = 0; i < ids.length; i += TOTES_PER_QUERY) {
        const rows = await this.db
          .selectFrom('deliveries')
          .leftJoin('delivery_stability', 'delivery_stability.delivery_id', 'deliveries.id')
          .select([
            'id',
            'tote_id',
            'rx_id',
            'pharmacy_id',
            'fleet_id',
            'profile',
            'cold_chain_required',
            'bound_from',
            'bound_to',
            'delivery_stability.plan',
          ])
          .where('tote_id', 'in', ids.slice(i, i + TOTES_PER_QUERY))
          .where('bound_from', 'is not', null)
          .orderBy('bound_from')
          .execute()
        for (const row of rows) {
          byTote.get(row.tote_id!)!.push({
            deliveryId: row.id,
            rxId: row.rx_id,
            pharmacyId: row.pharmacy_id,
            fleetId: row.fleet_id,
            profile: row.cold_chain_required ? judgedProfile(row.profile!, row.plan) : null,
            fromMs: Date.parse(row.bound_from!),
            toMs: row.bound_to ? Date.parse(row.bound_to) : null,
          })
        }
      }
      // An invalidate() during the read: answer with what was read (as a read started just before
      // the change would have), but cache nothing, so the next publish reads the change.
      if (generation === this.generation)
        for (const [toteId, bindings] of byTote)
          this.cache.set(toteId, { loadedAt: now, usedAt: this.cache.get(toteId)?.usedAt ?? now, bindings })
      for (const [toteId, waiters] of wanted) for (const w of waiters) w.resolve(byTote.get(toteId)!)
    } catch (error) {
      for (const waiters of wanted.values()) for (const w of waiters) w.reject(error)
    }
  }
}

/** The binding whose interval [from, to) contains `ts`, if any. */
export function bindingAt(bindings: readonly Binding[], ts: number): Binding | null {
  for (let i = bindings.length - 1; i >= 0; i--) {
    const b = bindings[i]!
    if (ts >= b.fromMs && (b.toMs === null || ts < b.toMs)) return b
  }
  return null
}
