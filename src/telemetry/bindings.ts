import type { TemperatureProfile } from '../../rules/profile.js'
import type { Clock } from '../clock.js'
import type { Db } from '../store/schema.js'

/** A tote's trip with one delivery: from the dispatch's occurred_at to the end's (SPEC §4). */
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

type Entry = { loadedAt: number; bindings: Binding[] }

// Another instance may dispatch or end a delivery (PostgreSQL deployments); this bounds how long
// a cached interval can be stale. Changes made by this process invalidate at once.
const CACHE_TTL_MS = 2_000

/**
 * Which delivery a reading belongs to, by its own timestamp (event time), so an hour of
 * buffered readings uploaded late lands on the right delivery.
 */
export class ToteBindings {
  private readonly cache = new Map<string, Entry>()

  constructor(private readonly db: Db, private readonly clock: Clock) {}

  async forTote(toteId: string): Promise<Binding[]> {
    const cached = this.cache.get(toteId)
    if (cached && this.clock.now() - cached.loadedAt < CACHE_TTL_MS) return cached.bindings
    const rows = await this.db.selectFrom('deliveries')
      .select(['id', 'rx_id', 'pharmacy_id', 'fleet_id', 'profile', 'cold_chain_required', 'bound_from', 'bound_to'])
      .where('tote_id', '=', toteId).where('bound_from', 'is not', null).orderBy('bound_from').execute()
    const bindings = rows.map((row) => ({
      deliveryId: row.id, rxId: row.rx_id, pharmacyId: row.pharmacy_id, fleetId: row.fleet_id,
      profile: row.cold_chain_required ? (JSON.parse(row.profile!) as TemperatureProfile) : null,
      fromMs: Date.parse(row.bound_from!), toMs: row.bound_to ? Date.parse(row.bound_to) : null,
    }))
    this.cache.set(toteId, { loadedAt: this.clock.now(), bindings })
    return bindings
  }

  /** Called when this process binds or releases a tote. */
  invalidate(toteId: string): void {
    this.cache.delete(toteId)
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
