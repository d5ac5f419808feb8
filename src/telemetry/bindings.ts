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

/** A tote's bindings as read at `loadedAt`: the open one and those that ended after `sinceMs`. */
type Entry = { loadedAt: number; usedAt: number; sinceMs: number; bindings: Binding[] }
type Waiter = { oldestTs: number; resolve: (bindings: Binding[]) => void; reject: (error: unknown) => void }

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
/** Tote ids per `IN (…)` list (twice in a read, one per branch): well below SQLite's 32,766 and PostgreSQL's 65,535 parameters. */
const TOTES_PER_QUERY = 500
/**
 * How far back a tote's cached bindings reach: its open binding and those that ended in the last
 * week. A tote makes trips for years, and every publishing tote's bindings are read again each
 * TTL: all of them would make ingest dearer with every trip ever made (and PostgreSQL's planner
 * walked every bound delivery for them: 0.5 s a read on a year of history). A payload with a
 * reading older than that (a buffer uploaded days late) reads its own tote's bindings back to it.
 */
const RECENT_MS = 7 * 86_400_000

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
  /** Late uploads' reads in flight, per tote: publishes of one buffer share one. */
  private readonly late = new Map<string, { sinceMs: number; read: Promise<Binding[]> }>()
  private generation = 0
  private sweptAt = -Infinity

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /**
   * The tote's bindings that may hold a reading at `oldestTs` or later, when the cached copy is
   * fresh enough and reaches back that far; undefined when they must be read (forTote).
   */
  cached(toteId: string, oldestTs = Infinity): Binding[] | undefined {
    const cached = this.cache.get(toteId)
    if (cached === undefined) return undefined
    const now = this.clock.now()
    cached.usedAt = now
    return now - cached.loadedAt < CACHE_TTL_MS && oldestTs >= cached.sinceMs ? cached.bindings : undefined
  }

  /** The tote's bindings that may hold a reading at `oldestTs` or later (its open one and those that ended after it), oldest first. */
  async forTote(toteId: string, oldestTs = Infinity): Promise<Binding[]> {
    if (Number.isNaN(oldestTs)) throw new RangeError('forTote: oldestTs is not a number')
    const cached = this.cached(toteId, oldestTs)
    if (cached) return cached
    if (oldestTs < this.clock.now() - RECENT_MS) return this.readLate(toteId, oldestTs)
    return new Promise<Binding[]>((resolve, reject) => {
      const waiters = this.wanted.get(toteId)
      if (waiters) return waiters.push({ oldestTs, resolve, reject })
      this.wanted.set(toteId, [{ oldestTs, resolve, reject }])
      // The publishes of one socket read arrive together: gather their totes into one query.
      if (this.wanted.size === 1 && this.reading === null) queueMicrotask(() => this.read())
    })
  }

  /**
   * The binding of one delivery to this tote, if it has one (a binding just recorded, however far
   * back it reaches), and the binding change its readings have not followed yet (migration 0067).
   */
  async ofDelivery(toteId: string, deliveryId: string): Promise<{ binding: Binding | undefined; followPending: number | null }> {
    const row = await selectBindings(this.db).select('follow_pending').where('id', '=', deliveryId).executeTakeFirst()
    const bound = row !== undefined && row.tote_id === toteId && row.bound_from !== null
    return { binding: bound ? toBinding(row) : undefined, followPending: row?.follow_pending ?? null }
  }

  /**
   * A late upload (a reading older than the cached week): the tote's bindings back to its oldest
   * reading, read for this tote alone and cached with that reach until the next refresh, so a
   * tote whose clock is years off reads them once per refresh, not once per publish.
   */
  private readLate(toteId: string, sinceMs: number): Promise<Binding[]> {
    const inFlight = this.late.get(toteId)
    if (inFlight && inFlight.sinceMs <= sinceMs) return inFlight.read
    const generation = this.generation
    const now = this.clock.now()
    const read = this.readSince([toteId], sinceMs)
      .then((byTote) => {
        const bindings = byTote.get(toteId)!
        if (generation === this.generation) this.cache.set(toteId, { loadedAt: now, usedAt: now, sinceMs, bindings })
        return bindings
      })
      .finally(() => {
        if (this.late.get(toteId)?.read === read) this.late.delete(toteId)
      })
    this.late.set(toteId, { sinceMs, read })
    return read
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
    // The week back from now, and further for a waiter whose reading was inside the week when it
    // asked but is not by this read's now.
    let sinceMs = now - RECENT_MS
    for (const waiters of wanted.values()) for (const w of waiters) sinceMs = Math.min(sinceMs, w.oldestTs)
    try {
      const byTote = await this.readSince(ids, sinceMs)
      // An invalidate() during the read: answer with what was read (as a read started just before
      // the change would have), but cache nothing, so the next publish reads the change.
      if (generation === this.generation)
        for (const [toteId, bindings] of byTote)
          this.cache.set(toteId, { loadedAt: now, usedAt: this.cache.get(toteId)?.usedAt ?? now, sinceMs, bindings })
      for (const [toteId, waiters] of wanted) for (const w of waiters) w.resolve(byTote.get(toteId)!)
    } catch (error) {
      for (const waiters of wanted.values()) for (const w of waiters) w.reject(error)
    }
  }

  /**
   * Per tote, its open binding and those that ended after `sinceMs`, oldest first: one read a
   * `TOTES_PER_QUERY` totes, the union of two index ranges per tote (the open binding from an
   * index of open deliveries, the ended ones from `deliveries_tote_ended`), so that it costs the
   * bindings returned, not the trips the totes ever made.
   */
  private async readSince(ids: readonly string[], sinceMs: number): Promise<Map<string, Binding[]>> {
    const byTote = new Map<string, Binding[]>(ids.map((id) => [id, []]))
    const since = new Date(sinceMs).toISOString()
    for (let i = 0; i < ids.length; i += TOTES_PER_QUERY) {
      const totes = ids.slice(i, i + TOTES_PER_QUERY)
      // A tote is set with its binding's start (the dispatch), so the open branch asks nothing of
      // `bound_from`: `is not null` would only let SQLite range over every trip of the tote in
      // `deliveries_tote`. A row without a start, should there be one, is skipped here instead.
      const open = selectBindings(this.db).where('tote_id', 'in', totes).where('bound_to', 'is', null)
      const ended = selectBindings(this.db).where('tote_id', 'in', totes).where('bound_to', '>', since)
      for (const row of await open.unionAll(ended).execute()) {
        if (row.bound_from !== null) byTote.get(row.tote_id!)!.push(toBinding(row))
      }
    }
    for (const bindings of byTote.values()) bindings.sort((a, b) => a.fromMs - b.fromMs)
    return byTote
  }
}

/** Deliveries' bindings as `toBinding` reads them: every query of bindings starts here. */
export function selectBindings(db: Db) {
  return db
    .selectFrom('deliveries')
    .leftJoin('delivery_stability', 'delivery_stability.delivery_id', 'deliveries.id')
    .select(['id', 'tote_id', 'rx_id', 'pharmacy_id', 'fleet_id', 'profile', 'cold_chain_required', 'bound_from', 'bound_to'])
    .select('delivery_stability.plan')
}

/** A binding's row as `selectBindings` reads it. */
type BindingRow = {
  id: string
  tote_id: string | null
  rx_id: string
  pharmacy_id: string
  fleet_id: string | null
  profile: string | null
  cold_chain_required: number
  bound_from: string | null
  bound_to: string | null
  plan: string | null
}

export function toBinding(row: BindingRow): Binding {
  return {
    deliveryId: row.id,
    rxId: row.rx_id,
    pharmacyId: row.pharmacy_id,
    fleetId: row.fleet_id,
    profile: row.cold_chain_required ? judgedProfile(row.profile!, row.plan) : null,
    fromMs: Date.parse(row.bound_from!),
    toMs: row.bound_to ? Date.parse(row.bound_to) : null,
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
