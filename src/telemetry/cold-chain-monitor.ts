import type { Logger } from 'pino'
import { beyondHardLimit, breakOnArrival, evaluate, type ColdChainState, type RuleEvent, type StabilityPlan } from '../../rules/index.js'
import type { Clock } from '../clock.js'
import type { Metrics } from '../metrics.js'
import type { ReadingRow } from '../timeseries/sink.js'
import type { Binding } from './bindings.js'
import { DeliveryStates, type Track } from './cold-chain/delivery-states.js'
import { PendingEvents } from './cold-chain/event-emission.js'
import { LateRecomputes } from './cold-chain/late-recompute.js'
import { OpenDeliveryWatch, type OpenDelivery } from './cold-chain/open-watch.js'
import { Persister } from './cold-chain/persister.js'
import type { ColdChainStore, LeasePort } from './cold-chain/port.js'
import { ReattributionHold } from './cold-chain/reattribution-hold.js'
import { ToteReorderBuffers } from './cold-chain/reorder-buffers.js'
import { watchSilence } from './cold-chain/silence-watch.js'

export type { ColdChainStore, LeasePort } from './cold-chain/port.js'
export { createColdChainStore } from './cold-chain/sql-store.js'

/**
 * Runs the rule engine over committed readings: per tote in event-time order behind the reorder
 * window, per delivery with its prescription's profile (rules/README.md). Engine state lives in memory
 * and is rebuilt from the stored readings when first needed, so a restart misses nothing; rule
 * events carry deterministic keys and the outbox keeps one per key, so none is emitted twice.
 *
 * This class only coordinates; each job is a module of cold-chain/: the rule-state cache and its
 * leases (delivery-states), reorder windows (reorder-buffers), reattribution holds
 * (reattribution-hold), sensor gaps (silence-watch), late readings (late-recompute), events on
 * their way (event-emission), saving (persister) and the open deliveries (open-watch). Its only
 * I/O is the ColdChainStore port (cold-chain/port.ts; SQL adapter in cold-chain/sql-store.ts).
 */
export class ColdChainMonitor {
  private readonly states: DeliveryStates
  private readonly buffers: ToteReorderBuffers
  private readonly held = new ReattributionHold()
  private readonly pending = new PendingEvents()
  private readonly recomputes: LateRecomputes
  private readonly persister: Persister
  private readonly openWatch: OpenDeliveryWatch
  private readonly scratchEvents: RuleEvent[] = []
  private readonly lateRows = new Map<Track, ReadingRow[]>()

  constructor(
    private readonly deps: {
      store: ColdChainStore
      clock: Clock
      metrics: { ruleEvaluation: Pick<Metrics['ruleEvaluation'], 'observe'> }
      logger: Logger
      windowMs: number
      /** Several copies share the store: one evaluates each delivery at a time (telemetry/evaluation-leases.ts). */
      leases?: LeasePort | undefined
      /**
       * Totes whose readings were received and are still being stored (GroupCommitter.storingTotes):
       * not judged silent, since a tote that spoke before its limit is not offline.
       */
      storingTotes?: () => ReadonlySet<string>
    },
  ) {
    const { store, leases, logger } = deps
    this.states = new DeliveryStates({ store, leases, logger, loaded: (track, events) => this.pending.add(track, events) })
    this.buffers = new ToteReorderBuffers(deps.windowMs)
    this.persister = new Persister({ store, states: this.states, pending: this.pending, logger })
    const save = () => this.persister.request(false)
    this.recomputes = new LateRecomputes({ states: this.states, store, pending: this.pending, logger, save })
    this.openWatch = new OpenDeliveryWatch(this.states, (id) => this.end(id))
  }

  /** Whether another copy evaluates this delivery: its readings stored here must be forwarded to it. */
  isRemote(deliveryId: string): boolean {
    return this.states.isRemote(deliveryId)
  }

  /**
   * Readings another copy stored for a delivery this copy evaluates (forwarded over PostgreSQL
   * NOTIFY): judged like this copy's own committed readings. Rows of a delivery whose state is
   * being read wait for it; rows of a delivery this copy does not evaluate are dropped (whoever
   * takes its lease reads them from the store).
   */
  acceptForwarded(rows: ReadingRow[]): void {
    const loads: Promise<void>[] = []
    for (const row of rows) {
      const loading = row.delivery_id ? this.states.loadingOf(row.delivery_id) : undefined
      if (loading && !loads.includes(loading)) loads.push(loading)
    }
    if (loads.length === 0) return this.accept(rows)
    void Promise.all(loads.map((l) => l.catch(() => undefined))).then(() => this.accept(rows))
  }

  /**
   * Forwarded readings may have been missed (the listening connection dropped): every delivery
   * this copy evaluates is recomputed from the store.
   */
  recomputeAll(): void {
    for (const id of this.states.ids()) this.recomputes.later(id, true)
    this.schedulePersist()
  }

  /** Gives up this copy's leases (a graceful stop, after flush()): the other copies take over at once. */
  releaseLeases(): Promise<void> {
    return this.states.release()
  }

  /**
   * Loads the state of every delivery these rows touch, and flags rows older than what was judged.
   * Null when nothing had to be loaded (the usual case: no await on the ingest hot path).
   */
  prepare(rows: ReadingRow[], bindings: readonly Binding[]): Promise<void> | null {
    let loading: Promise<void> | null = null
    for (const binding of bindings) {
      const deliveryId = binding.deliveryId
      if (binding.profile && !this.states.known(deliveryId)) {
        const toteId = rows[0]!.tote_id
        loading = (loading ?? Promise.resolve()).then(() => (this.states.get(deliveryId) ? undefined : this.states.load(toteId, binding)))
      }
    }
    if (loading) return loading.then(() => this.flagLate(rows))
    this.flagLate(rows)
    return null
  }

  private flagLate(rows: ReadingRow[]): void {
    for (const row of rows) {
      const lastTs = row.delivery_id ? this.states.get(row.delivery_id)?.state.lastTs : null
      if (lastTs != null && row.ts <= lastTs) row.late = true
    }
  }

  /** Evaluates committed rows (already prepared). Synchronous: calls keep the order of commits. */
  accept(rows: readonly ReadingRow[]): void {
    const started = performance.now()
    const now = this.deps.clock.now()
    const late = this.lateRows
    for (const row of inTsOrder(rows)) {
      if (this.held.keep(row)) continue
      const track = row.delivery_id ? this.states.get(row.delivery_id) : undefined
      if (!track) continue
      // At or before what was judged (also what a rebuild from the store judged meanwhile, which
      // may not have seen it): judged as late rather than let evaluate() skip it.
      if (track.state.lastTs !== null && row.ts <= track.state.lastTs) {
        addLate(late, track, row)
        continue
      }
      // The delivery's late readings so far go first, as they would have in event-time order.
      const lateFirst = late.size > 0 ? late.get(track) : undefined // no lookup per reading in the usual case
      if (lateFirst) {
        late.delete(track)
        this.judgeLate(track, lateFirst)
      }
      const pushed = this.buffers.push(row, now)
      if (pushed.late) addLate(late, track, row)
      this.evaluateReleased(pushed.released)
      if (!pushed.late && !pushed.duplicate && track.state.broken === null && beyondHardLimit(track.binding.profile, row.temp_c))
        this.judgeOnArrival(track, row)
    }
    for (const [track, readings] of late) this.judgeLate(track, readings)
    late.clear()
    this.deps.metrics.ruleEvaluation.observe((performance.now() - started) / 1_000)
    this.schedulePersist()
  }

  /**
   * A reading past a hard limit breaks the delivery now, not after the reorder window
   * (rules/hard-limit.ts): judged on the delivery's readings the window holds up to it.
   */
  private judgeOnArrival(track: Track, row: ReadingRow): void {
    const events = this.scratchEvents
    const held = this.buffers.held(row.tote_id)
    const mine = held.every((r) => r.delivery_id === row.delivery_id) ? held : held.filter((r) => r.delivery_id === row.delivery_id)
    if (!breakOnArrival(track.state, track.binding.profile, row, mine, events)) return
    track.dirty = true
    this.pending.add(track, events)
    events.length = 0
  }

  /**
   * Late readings of one delivery: replayed from memory when the delivery's recent history reaches
   * back to them (cold-chain/recent-history.ts), else recomputed from the store, where they are.
   */
  private judgeLate(track: Track, readings: readonly ReadingRow[]): void {
    const deliveryId = track.binding.deliveryId
    if (this.recomputes.absorbs(deliveryId, readings)) return
    if (!readings.every((r) => track.history.covers(r.ts))) return this.recomputes.later(deliveryId)
    const events = this.scratchEvents
    track.state = track.history.judgeLate(readings, track.state, track.binding.profile, events)
    track.dirty = true // saved with the next tick's summaries, or with the events below
    if (events.length) {
      this.pending.add(track, events)
      events.length = 0
    }
  }

  /**
   * Wall-clock duties: release readings of totes that went quiet, raise sensor gaps, persist
   * summaries, and with leases renew them and take over deliveries whose copy went away.
   * Called about once a second.
   */
  tick(): void {
    const now = this.deps.clock.now()
    for (const released of this.buffers.releaseSilent(now)) this.evaluateReleased(released)
    const storing = this.deps.storingTotes?.()
    watchSilence(
      this.states.all(),
      now,
      (toteId) => this.buffers.waiting(toteId) > 0 || this.held.isHeld(toteId) || storing?.has(toteId) === true,
      (track, events) => this.pending.add(track, events),
    )
    void this.persister.request(true)
    if (this.recomputes.size) void this.recomputes.runSoon() // retries those whose read failed
    this.states.sweep()
  }

  /**
   * The tote's binding changed and its stored readings are being attributed anew (see
   * reattributed): until release(), its committed readings wait and its silence is not judged,
   * so nothing judges its delivery without the readings it is about to get.
   */
  hold(toteId: string): void {
    this.held.hold(toteId)
  }

  /** Ends a hold(): the readings that waited are judged as accept() judges any (in timestamp order). */
  release(toteId: string): void {
    const rows = this.held.release(toteId)
    if (rows?.length) this.accept(rows)
  }

  /**
   * Stored readings became this delivery's after the fact (a dispatch recorded with an earlier
   * `occurred_at`, see ReadingSink.attribute): its state is rebuilt from everything stored, as
   * for late readings (a break already announced stands). Call it while the tote is held: no
   * reading of this delivery has been judged since its binding appeared, so none is in the
   * reorder buffer. Not loaded: loading reads the store.
   */
  async reattributed(deliveryId: string): Promise<void> {
    await this.states.loadingOf(deliveryId)?.catch(() => undefined) // it may have read the store before the attribution
    if (!this.states.get(deliveryId)) return
    this.recomputes.later(deliveryId, true)
    await this.recomputes.runSoon()
  }

  /**
   * An excursion assessment changed the delivery's stability plan (docs/stability.md): its state is
   * recomputed from the store with the new plan, up to what was judged, and its next readings are
   * judged with it. A break already announced stands. Not loaded here: a later load reads the new plan.
   */
  async planChanged(deliveryId: string, plan: StabilityPlan): Promise<void> {
    await this.states.loadingOf(deliveryId)?.catch(() => undefined)
    const track = this.states.get(deliveryId)
    if (!track) return
    track.binding = { ...track.binding, profile: { ...track.binding.profile, stability: plan } }
    this.recomputes.later(deliveryId)
    await this.recomputes.runSoon()
  }

  /** Open cold-chain deliveries with a tote are watched even before their first reading (cold-chain/open-watch.ts). */
  watchOpenDeliveries(open: readonly OpenDelivery[]): Promise<void> {
    return this.openWatch.watch(open)
  }

  /** Writes every pending event and summary; used at shutdown and by tests. */
  async flush(): Promise<void> {
    for (const released of this.buffers.releaseAll()) this.evaluateReleased(released)
    await this.recomputes.runSoon() // also a pass already under way, whose last read is in flight
    await this.persister.request(true)
  }

  state(deliveryId: string): ColdChainState | undefined {
    return this.states.get(deliveryId)?.state
  }

  /** The delivery ended: judge what is still held for it, save, and forget it. */
  private async end(deliveryId: string): Promise<void> {
    const track = this.states.get(deliveryId)
    if (!track) return
    this.evaluateReleased(this.buffers.releaseTote(track.toteId))
    // A late reading's recompute may reveal a break: it runs before the delivery is forgotten. The
    // first wait ends a pass under way; the second runs this delivery's if it is still due (its read
    // had failed).
    if (this.recomputes.awaits(deliveryId)) await this.recomputes.runSoon()
    if (this.recomputes.awaits(deliveryId)) await this.recomputes.runSoon()
    track.dirty = true
    await this.persister.request(true)
    this.states.forget(deliveryId)
    await this.states.release([deliveryId])
  }

  private evaluateReleased(released: readonly ReadingRow[]): void {
    let i = 0
    while (i < released.length) {
      // Consecutive readings of one delivery are evaluated together.
      const deliveryId = released[i]!.delivery_id
      let j = i + 1
      while (j < released.length && released[j]!.delivery_id === deliveryId) j++
      const track = deliveryId ? this.states.get(deliveryId) : undefined
      if (track) {
        // One scratch array for every evaluation: events are copied out by PendingEvents.add.
        const events = this.scratchEvents
        const readings = i === 0 && j === released.length ? released : released.slice(i, j)
        evaluate(track.state, track.binding.profile, readings, events)
        track.history.evaluated(readings, track.state)
        track.dirty = true
        if (events.length) {
          this.pending.add(track, events)
          events.length = 0
        }
      }
      i = j
    }
  }

  /** Events go out at once (reading → event latency); the other summaries wait for the tick; recomputes run apart. */
  private schedulePersist(): void {
    if (this.pending.size) void this.persister.request(false)
    if (this.recomputes.size) void this.recomputes.runSoon()
  }
}

/**
 * A group's rows in event-time order. On an external broker a tote's readings reach a copy over
 * several sessions (the shared subscription deals them out), so a group often has a tote's newer
 * reading before an older one; judged as they came, the older would be late and cost a replay.
 * Sorted (stably: a tote's readings keep their order among equal ts), they are judged
 * as if they had come in order. Rows already in order (one connection, readings in order) are used as they are.
 */
function inTsOrder(rows: readonly ReadingRow[]): readonly ReadingRow[] {
  for (let i = 1; i < rows.length; i++) if (rows[i]!.ts < rows[i - 1]!.ts) return [...rows].sort((a, b) => a.ts - b.ts)
  return rows
}

function addLate(late: Map<Track, ReadingRow[]>, track: Track, row: ReadingRow): void {
  const rows = late.get(track)
  if (rows) rows.push(row)
  else late.set(track, [row])
}
