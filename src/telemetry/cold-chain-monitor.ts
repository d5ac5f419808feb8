import { sql } from 'kysely'
import type { Logger } from 'pino'
import { checkSilence, evaluate, recompute, ReorderBuffer, replay, type ColdChainState, type RuleEvent } from '../../rules/index.js'
import type { Clock } from '../clock.js'
import { coldChainFigures, type ColdChainFigures } from '../domain/cold-chain.js'
import { iso } from '../clock.js'
import type { Metrics } from '../metrics.js'
import type { NewEvent, Outbox } from '../events/outbox.js'
import type { Db, Executor } from '../store/schema.js'
import type { ReadingRow, ReadingSink } from '../timeseries/sink.js'
import type { Binding } from './bindings.js'
import type { EvaluationLeases } from './evaluation-leases.js'

type Track = { binding: Binding & { profile: NonNullable<Binding['profile']> }; toteId: string; state: ColdChainState; dirty: boolean }

const ALL_TIME = Number.MAX_SAFE_INTEGER
// Summaries written per UPDATE: one statement instead of one per delivery (a tick under load has
// every bound tote's delivery to save); 100 rows are 300 bound parameters, far below SQLite's and
// PostgreSQL's limits.
const SUMMARIES_PER_STATEMENT = 100
// However many deliveries raise events meanwhile, each of the tick's transactions also takes this
// many of its other summaries, so those cannot be put off for as long as events keep coming.
const OTHER_SUMMARIES_PER_TRANSACTION = 20

/**
 * Runs the rule engine over committed readings: per tote in event-time order behind the reorder
 * window, per delivery with its prescription's profile (rules/README.md). Engine state lives in memory
 * and is rebuilt from the stored readings when first needed, so a restart misses nothing; rule
 * events carry deterministic keys and the outbox keeps one per key, so none is emitted twice.
 */
export class ColdChainMonitor {
  private readonly tracks = new Map<string, Track>()
  /** Deliveries whose state is being read, so concurrent callers share one read. */
  private readonly loading = new Map<string, Promise<void>>()
  /** watchOpenDeliveries: the pass in progress, and the newest list waiting for the next one. */
  private watching: Promise<void> | null = null
  private nextOpen: readonly { toteId: string; binding: Binding }[] | null = null
  private readonly buffers = new Map<string, ReorderBuffer<ReadingRow>>()
  private readonly pendingEvents: NewEvent[] = []
  private readonly scratchEvents: RuleEvent[] = []
  /**
   * Deliveries to recompute from the store: true from everything stored (readings given after
   * the fact, see reattributed), false up to what was judged (a late reading).
   */
  private readonly recomputes = new Map<string, boolean>()
  /** Totes whose binding change is being applied to stored readings (see hold), and their waiting rows. */
  private readonly held = new Map<string, { holds: number; rows: ReadingRow[] }>()
  /** Tracks whose summary must be written with the next events (they raised some, or were recomputed). */
  private readonly withEvents = new Set<Track>()
  private persisting: Promise<void> = Promise.resolve()
  /** A persist waiting for the one in progress: later requests join it instead of queueing another. */
  private queued: { promise: Promise<void>; summaries: boolean } | null = null
  /**
   * With several copies on one PostgreSQL (`leases`): deliveries whose lease another copy holds,
   * so that copy evaluates them; this one forwards their readings (isRemote) and takes the lease
   * over when it runs out (sweepLeases).
   */
  private readonly remote = new Map<string, { toteId: string; binding: Binding }>()
  private sweeping: Promise<void> | null = null

  constructor(
    private readonly deps: {
      db: Db
      sink: ReadingSink
      outbox: Outbox
      clock: Clock
      metrics: Metrics
      logger: Logger
      windowMs: number
      /** Several copies share the store: one evaluates each delivery at a time (telemetry/evaluation-leases.ts). */
      leases?: EvaluationLeases | undefined
    },
  ) {}

  /** Whether another copy evaluates this delivery: its readings stored here must be forwarded to it. */
  isRemote(deliveryId: string): boolean {
    return this.remote.has(deliveryId)
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
      const loading = row.delivery_id ? this.loading.get(row.delivery_id) : undefined
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
    for (const id of this.tracks.keys()) this.recomputeLater(id, true)
    this.schedulePersist()
  }

  /**
   * Every tick with leases: renew ours, drop the deliveries whose lease another copy took, and
   * take over those whose lease ran out (their copy died or stopped), rebuilding their state
   * from the store.
   */
  private sweepLeases(leases: EvaluationLeases): void {
    if (this.sweeping) return
    this.sweeping = (async () => {
      const held = await leases.renew()
      for (const [id, track] of this.tracks) {
        if (held.has(id) || this.loading.has(id)) continue
        this.deps.logger.warn({ delivery_id: id }, 'cold-chain monitor: another copy took over this delivery')
        this.tracks.delete(id)
        this.remote.set(id, { toteId: track.toteId, binding: track.binding })
      }
      if (this.remote.size === 0) return
      for (const id of await leases.acquire([...this.remote.keys()])) {
        const { toteId, binding } = this.remote.get(id)!
        this.remote.delete(id)
        this.deps.logger.info({ delivery_id: id }, 'cold-chain monitor: took over the evaluation of this delivery')
        await this.load(toteId, binding).catch((err: unknown) =>
          this.deps.logger.warn({ err, delivery_id: id }, 'cold-chain monitor: loading a delivery taken over failed'),
        )
      }
    })()
      .catch((err: unknown) => this.deps.logger.warn({ err }, 'cold-chain monitor: renewing evaluation leases failed'))
      .finally(() => (this.sweeping = null))
  }

  /** Gives up this copy's leases (a graceful stop, after flush()): the other copies take over at once. */
  async releaseLeases(): Promise<void> {
    await this.sweeping
    await this.deps.leases?.release()
  }

  /**
   * Loads the state of every delivery these rows touch, and flags rows older than what was judged.
   * Null when nothing had to be loaded (the usual case: no await on the ingest hot path).
   */
  prepare(rows: ReadingRow[], bindings: readonly Binding[]): Promise<void> | null {
    let loading: Promise<void> | null = null
    for (const binding of bindings) {
      const deliveryId = binding.deliveryId
      if (binding.profile && !this.tracks.has(deliveryId) && !this.remote.has(deliveryId)) {
        const toteId = rows[0]!.tote_id
        loading = (loading ?? Promise.resolve()).then(() => (this.tracks.has(deliveryId) ? undefined : this.load(toteId, binding)))
      }
    }
    if (loading) return loading.then(() => this.flagLate(rows))
    this.flagLate(rows)
    return null
  }

  private flagLate(rows: ReadingRow[]): void {
    for (const row of rows) {
      const lastTs = row.delivery_id ? this.tracks.get(row.delivery_id)?.state.lastTs : null
      if (lastTs != null && row.ts <= lastTs) row.late = true
    }
  }

  /** Evaluates committed rows (already prepared). Synchronous: calls keep the order of commits. */
  accept(rows: readonly ReadingRow[]): void {
    const started = performance.now()
    const now = this.deps.clock.now()
    for (const row of rows) {
      if (this.held.size > 0) {
        const held = this.held.get(row.tote_id)
        if (held) {
          held.rows.push(row)
          continue
        }
      }
      const track = row.delivery_id ? this.tracks.get(row.delivery_id) : undefined
      if (!track) continue
      // Late, or judged meanwhile by a rebuild from the store (reattributed) that may not have
      // seen it: recompute from the store, where it is, rather than let evaluate() skip it.
      if (row.late || (track.state.lastTs !== null && row.ts <= track.state.lastTs)) {
        this.recomputeLater(track.binding.deliveryId)
        continue
      }
      const pushed = this.bufferOf(row.tote_id).push(row, now)
      if (pushed.late) this.recomputeLater(track.binding.deliveryId)
      this.evaluateReleased(pushed.released)
    }
    this.deps.metrics.ruleEvaluation.observe((performance.now() - started) / 1_000)
    this.schedulePersist()
  }

  /**
   * Wall-clock duties: release readings of totes that went quiet, raise sensor gaps, persist
   * summaries. Called about once a second.
   */
  tick(): void {
    const now = this.deps.clock.now()
    for (const buffer of this.buffers.values()) this.evaluateReleased(buffer.flushSilent(now))
    for (const track of this.tracks.values()) {
      if (track.binding.toMs !== null || (this.buffers.get(track.toteId)?.size ?? 0) > 0 || this.held.has(track.toteId)) continue
      const before = track.state.offlineAnnouncedSince
      const events: RuleEvent[] = []
      checkSilence(track.state, track.binding.profile, now, events)
      if (events.length || before !== track.state.offlineAnnouncedSince) this.collect(track, events)
    }
    this.schedulePersist(true)
    if (this.deps.leases) this.sweepLeases(this.deps.leases)
  }

  /**
   * The tote's binding changed and its stored readings are being attributed anew (see
   * reattributed): until release(), its committed readings wait and its silence is not judged,
   * so nothing judges its delivery without the readings it is about to get.
   */
  hold(toteId: string): void {
    const held = this.held.get(toteId)
    if (held) held.holds += 1
    else this.held.set(toteId, { holds: 1, rows: [] })
  }

  /** Ends a hold(): the readings that waited are judged, in the order they were committed. */
  release(toteId: string): void {
    const held = this.held.get(toteId)
    if (!held || --held.holds > 0) return
    this.held.delete(toteId)
    if (held.rows.length) this.accept(held.rows)
  }

  /**
   * Stored readings became this delivery's after the fact (a dispatch recorded with an earlier
   * `occurred_at`, see ReadingSink.attribute): its state is rebuilt from everything stored, as
   * for late readings (a break already announced stands). Call it while the tote is held: no
   * reading of this delivery has been judged since its binding appeared, so none is in the
   * reorder buffer. Not loaded: loading reads the store.
   */
  async reattributed(deliveryId: string): Promise<void> {
    await this.loading.get(deliveryId)?.catch(() => undefined) // it may have read the store before the attribution
    if (!this.tracks.has(deliveryId)) return
    this.recomputeLater(deliveryId, true)
    await this.persistNow(false)
  }

  /**
   * Open cold-chain deliveries with a tote are watched even before their first reading.
   * Called on every dispatch: while a pass runs, later calls only leave the newest list for one
   * more pass (and wait for it), so 1,000 dispatches in a row are not 1,000 overlapping passes
   * each reading every delivery not loaded yet.
   */
  watchOpenDeliveries(open: readonly { toteId: string; binding: Binding }[]): Promise<void> {
    this.nextOpen = open
    this.watching ??= this.watchPasses()
    return this.watching
  }

  private async watchPasses(): Promise<void> {
    let failure: unknown = null
    try {
      while (this.nextOpen !== null) {
        const open = this.nextOpen
        this.nextOpen = null
        // A pass that fails (a read) must not leave a newer list unwatched: go on; report only
        // if the last pass, which saw the newest list, failed too.
        try {
          await this.watchOnce(open)
          failure = null
        } catch (error) {
          failure = error
        }
      }
    } finally {
      this.watching = null // no await since the loop's last check: a call in between started no pass of its own
    }
    if (failure !== null) throw failure
  }

  private async watchOnce(open: readonly { toteId: string; binding: Binding }[]): Promise<void> {
    const openIds = new Set(open.map((o) => o.binding.deliveryId))
    // One delivery that cannot be read now must not keep the others (or the clean-up below) waiting.
    let failure: unknown = null
    for (const { toteId, binding } of open) {
      if (!binding.profile || this.tracks.has(binding.deliveryId) || this.remote.has(binding.deliveryId)) continue
      await this.load(toteId, binding).catch((error: unknown) => void (failure ??= error))
    }
    for (const id of this.remote.keys()) if (!openIds.has(id)) this.remote.delete(id)
    for (const [id, track] of this.tracks) {
      if (openIds.has(id)) continue
      // The delivery ended: judge what is still held for it, save, and forget it.
      this.evaluateReleased(this.bufferOf(track.toteId).flushAll())
      track.dirty = true
      await this.persistNow(true)
      this.tracks.delete(id)
      await this.deps.leases?.release([id])
    }
    if (failure !== null) throw failure
  }

  /** Writes every pending event and summary; used at shutdown and by tests. */
  async flush(): Promise<void> {
    for (const buffer of this.buffers.values()) this.evaluateReleased(buffer.flushAll())
    await this.persistNow(true)
  }

  state(deliveryId: string): ColdChainState | undefined {
    return this.tracks.get(deliveryId)?.state
  }

  private load(toteId: string, binding: Binding): Promise<void> {
    const deliveryId = binding.deliveryId
    let loading = this.loading.get(deliveryId)
    if (loading === undefined) {
      loading = this.read(toteId, binding).finally(() => this.loading.delete(deliveryId))
      this.loading.set(deliveryId, loading)
    }
    return loading
  }

  private async read(toteId: string, binding: Binding): Promise<void> {
    const profile = binding.profile!
    if (this.deps.leases) {
      // Another copy evaluates it: its readings are forwarded there until its lease runs out.
      if (!(await this.deps.leases.acquireOne(binding.deliveryId))) {
        this.remote.set(binding.deliveryId, { toteId, binding })
        return
      }
      this.remote.delete(binding.deliveryId)
    }
    const [stored, announced] = await Promise.all([
      this.deps.sink.readingsForDelivery(binding.deliveryId, 0, ALL_TIME),
      announcedBreak(this.deps.db, binding.deliveryId),
    ])
    const { state, events } = replay(profile, binding.fromMs, stored)
    // A break already announced stands (rules/README.md, Semantics: events are never retracted), even one the stored
    // readings no longer show: a wall-clock sensor gap that a gateway's late upload filled in.
    if (announced !== null) state.broken = announced
    if (this.tracks.has(binding.deliveryId)) return // loaded meanwhile by a concurrent call
    const track: Track = { binding: { ...binding, profile }, toteId, state, dirty: stored.length > 0 }
    this.tracks.set(binding.deliveryId, track)
    if (events.length) this.collect(track, events) // re-raises what a crash may have kept from the outbox
  }

  private bufferOf(toteId: string): ReorderBuffer<ReadingRow> {
    let buffer = this.buffers.get(toteId)
    if (!buffer) this.buffers.set(toteId, (buffer = new ReorderBuffer<ReadingRow>(this.deps.windowMs)))
    return buffer
  }

  private evaluateReleased(released: readonly ReadingRow[]): void {
    let i = 0
    while (i < released.length) {
      // Consecutive readings of one delivery are evaluated together.
      const deliveryId = released[i]!.delivery_id
      let j = i + 1
      while (j < released.length && released[j]!.delivery_id === deliveryId) j++
      const track = deliveryId ? this.tracks.get(deliveryId) : undefined
      if (track) {
        // One scratch array for every evaluation: events are copied out by collect().
        const events = this.scratchEvents
        evaluate(track.state, track.binding.profile, i === 0 && j === released.length ? released : released.slice(i, j), events)
        track.dirty = true
        if (events.length) {
          this.collect(track, events)
          events.length = 0
        }
      }
      i = j
    }
  }

  private collect(track: Track, events: readonly RuleEvent[]): void {
    track.dirty = true
    if (events.length) this.withEvents.add(track)
    const b = track.binding
    for (const event of events) {
      this.pendingEvents.push({
        type: event.type,
        pharmacy_id: b.pharmacyId,
        fleet_id: b.fleetId,
        delivery_id: b.deliveryId,
        rx_id: b.rxId,
        data: { ...event.data, tote_id: track.toteId, at: iso(event.at) },
        dedupe_key: event.key,
      })
    }
  }

  /**
   * Events go out at once (reading → event latency), with the summaries of the deliveries they
   * concern; the other summaries wait for the next tick, so a busy second costs one summary write
   * per delivery, not one per delivery per event.
   */
  private schedulePersist(summaries = false): void {
    if (this.pendingEvents.length || this.recomputes.size || summaries) void this.persistNow(summaries)
  }

  /** `summaries`: write every changed summary, not only those of deliveries with events. */
  private persistNow(summaries: boolean): Promise<void> {
    if (this.queued) {
      // Not started yet: it will take whatever is pending when it starts.
      this.queued.summaries ||= summaries
      return this.queued.promise
    }
    const queued = { summaries, promise: Promise.resolve() }
    queued.promise = this.persisting
      .then(() => {
        this.queued = null
        return this.persist(queued.summaries)
      })
      .catch((err) => {
        this.deps.logger.error({ err }, 'cold-chain monitor: persisting events failed; will retry')
      })
    this.queued = queued
    this.persisting = queued.promise
    return queued.promise
  }

  private async persist(allSummaries: boolean): Promise<void> {
    for (const [deliveryId, everything] of [...this.recomputes]) {
      this.recomputes.delete(deliveryId)
      try {
        await this.recomputeLate(deliveryId, everything ? Number.POSITIVE_INFINITY : undefined)
      } catch (error) {
        this.recomputeLater(deliveryId, everything) // a failed read: the next persist tries again
        throw error
      }
    }
    // The tick's summaries (every delivery with new readings: a thousand at a time) go out
    // SUMMARIES_PER_STATEMENT per transaction with the event loop free in between: written at
    // once they held it ~20-45 ms every second, which showed in PUBACK p99. Events that come up
    // meanwhile ride in the next of these transactions.
    const rest = allSummaries ? [...this.tracks.values()].filter((t) => t.dirty) : []
    for (let pass = 0; ; pass++) {
      if (pass > 0) await new Promise((resolve) => setImmediate(resolve))
      const events = this.pendingEvents.splice(0)
      const urgent = [...this.withEvents]
      this.withEvents.clear()
      const dirty = urgent.filter((t) => t.dirty)
      const withUrgent = new Set(dirty)
      let room = Math.max(SUMMARIES_PER_STATEMENT - dirty.length, OTHER_SUMMARIES_PER_TRANSACTION)
      while (room > 0 && rest.length) {
        const t = rest.pop()!
        if (!t.dirty || withUrgent.has(t)) continue
        dirty.push(t)
        room -= 1
      }
      if (events.length === 0 && dirty.length === 0) return
      for (const t of dirty) t.dirty = false
      let messages: number
      try {
        messages = await this.deps.db.transaction().execute(async (trx) => {
          await writeSummaries(trx, dirty)
          return (await this.deps.outbox.append(trx, events)).messages
        })
      } catch (error) {
        this.pendingEvents.unshift(...events)
        for (const t of dirty) t.dirty = true
        for (const t of urgent) this.withEvents.add(t)
        throw error // the rest stay dirty: the next tick writes them
      }
      this.deps.outbox.committed(messages)
      if (rest.length === 0) return
    }
  }

  /** Asks the next persist to recompute the delivery; a recompute from everything covers a late one. */
  private recomputeLater(deliveryId: string, everything = false): void {
    if (everything || !this.recomputes.has(deliveryId)) this.recomputes.set(deliveryId, everything)
  }

  /**
   * A late reading: recompute from everything stored up to what was judged (or up to `upTo`); a
   * break it reveals is added, nothing is retracted.
   */
  private async recomputeLate(deliveryId: string, upTo?: number): Promise<void> {
    const track = this.tracks.get(deliveryId)
    if (!track) return
    const stored = await this.deps.sink.readingsForDelivery(deliveryId, 0, ALL_TIME)
    const events: RuleEvent[] = []
    track.state = recompute(track.state, track.binding.profile, stored, events, upTo).state
    track.dirty = true
    this.withEvents.add(track) // the recomputed summary goes out now, events or not
    if (events.length) this.collect(track, events)
  }
}

/**
 * The break recorded in the delivery's saved summary, if any. The summary of a delivery that
 * raises a break is written in the same transaction as the `cold-chain.break` event.
 */
async function announcedBreak(db: Db, deliveryId: string): Promise<ColdChainState['broken']> {
  const row = await db.selectFrom('deliveries').select('cold_chain').where('id', '=', deliveryId).executeTakeFirst()
  if (!row?.cold_chain) return null
  const saved = JSON.parse(row.cold_chain) as Partial<ColdChainFigures>
  return saved.break_reason && saved.broken_at ? { reason: saved.break_reason, at: Date.parse(saved.broken_at) } : null
}

/** The deliveries' `cold_chain` columns, SUMMARIES_PER_STATEMENT rows per UPDATE (CASE works on SQLite and PostgreSQL alike). */
async function writeSummaries(trx: Executor, tracks: readonly Track[]): Promise<void> {
  for (let i = 0; i < tracks.length; i += SUMMARIES_PER_STATEMENT) {
    const chunk = tracks.slice(i, i + SUMMARIES_PER_STATEMENT)
    if (chunk.length === 1) {
      const t = chunk[0]!
      await trx
        .updateTable('deliveries')
        .set({ cold_chain: JSON.stringify(coldChainFigures(t.state)) })
        .where('id', '=', t.binding.deliveryId)
        .execute()
      continue
    }
    const cases = sql.join(
      chunk.map((t) => sql`WHEN ${t.binding.deliveryId} THEN ${JSON.stringify(coldChainFigures(t.state))}`),
      sql` `,
    )
    await trx
      .updateTable('deliveries')
      .set({ cold_chain: sql<string>`CASE id ${cases} END` })
      .where(
        'id',
        'in',
        chunk.map((t) => t.binding.deliveryId),
      )
      .execute()
  }
}
