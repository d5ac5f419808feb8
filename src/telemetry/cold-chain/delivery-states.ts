import type { Logger } from 'pino'
import { initialColdChain, type ColdChainState, type RuleEvent } from '../../../rules/index.js'
import type { Binding } from '../bindings.js'
import type { ColdChainStore, LeasePort } from './port.js'
import { RecentHistory } from './recent-history.js'

/** A delivery this copy evaluates: its binding, its tote and the rule engine's state. */
export type Track = {
  binding: Binding & { profile: NonNullable<Binding['profile']> }
  toteId: string
  state: ColdChainState
  /** Recent readings and states, to judge late readings without the store (recent-history.ts). */
  history: RecentHistory
  /** Changed since its summary was last saved. */
  dirty: boolean
}

/**
 * The rule-state cache: the deliveries this copy evaluates, each loaded (rebuilt from its stored
 * readings) the first time it is needed, concurrent callers sharing one load. With several copies
 * (`leases`) a delivery is loaded only once this copy holds its lease; the deliveries another copy
 * holds are `remote`, and their readings are forwarded to it until its lease runs out (sweep).
 */
export class DeliveryStates {
  private readonly tracks = new Map<string, Track>()
  private readonly loading = new Map<string, Promise<void>>()
  private readonly remote = new Map<string, { toteId: string; binding: Binding }>()
  private sweeping: Promise<void> | null = null

  constructor(
    private readonly deps: {
      store: ColdChainStore
      leases?: LeasePort | undefined
      logger: Logger
      /** Events a load raised again (what a crash may have kept from the outbox). */
      loaded(track: Track, events: readonly RuleEvent[]): void
    },
  ) {}

  get(deliveryId: string): Track | undefined {
    return this.tracks.get(deliveryId)
  }

  all(): IterableIterator<Track> {
    return this.tracks.values()
  }

  ids(): IterableIterator<string> {
    return this.tracks.keys()
  }

  /** Loaded, or evaluated by another copy: nothing to load. */
  known(deliveryId: string): boolean {
    return this.tracks.has(deliveryId) || this.remote.has(deliveryId)
  }

  isRemote(deliveryId: string): boolean {
    return this.remote.has(deliveryId)
  }

  /** The load in progress, if any. */
  loadingOf(deliveryId: string): Promise<void> | undefined {
    return this.loading.get(deliveryId)
  }

  forget(deliveryId: string): void {
    this.tracks.delete(deliveryId)
  }

  /** Deliveries another copy evaluates that are no longer open are forgotten. */
  forgetRemoteExcept(open: ReadonlySet<string>): void {
    for (const id of this.remote.keys()) if (!open.has(id)) this.remote.delete(id)
  }

  load(toteId: string, binding: Binding): Promise<void> {
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
    const { store, leases } = this.deps
    if (leases) {
      // Another copy evaluates it: its readings are forwarded there until its lease runs out.
      if (!(await leases.acquireOne(binding.deliveryId))) {
        this.remote.set(binding.deliveryId, { toteId, binding })
        return
      }
      this.remote.delete(binding.deliveryId)
    }
    const [stored, announced] = await Promise.all([store.readings(binding.deliveryId, true), store.announcedBreak(binding.deliveryId)])
    const { state, events, history } = RecentHistory.replay(initialColdChain(profile, binding.fromMs), profile, stored)
    // A break already announced stands (rules/README.md, Semantics: events are never retracted), even one the stored
    // readings no longer show: a wall-clock sensor gap that a gateway's late upload filled in.
    if (announced !== null) state.broken = announced
    if (this.tracks.has(binding.deliveryId)) return // loaded meanwhile by a concurrent call
    const track: Track = { binding: { ...binding, profile }, toteId, state, history, dirty: stored.length > 0 }
    this.tracks.set(binding.deliveryId, track)
    if (events.length) this.deps.loaded(track, events)
  }

  /**
   * Every tick with leases: renew ours, drop the deliveries whose lease another copy took, and
   * take over those whose lease ran out (their copy died or stopped), rebuilding their state
   * from the store.
   */
  sweep(): void {
    const { leases, logger } = this.deps
    if (!leases || this.sweeping) return
    this.sweeping = (async () => {
      const held = await leases.renew()
      for (const [id, track] of this.tracks) {
        if (held.has(id) || this.loading.has(id)) continue
        logger.warn({ delivery_id: id }, 'cold-chain monitor: another copy took over this delivery')
        this.tracks.delete(id)
        this.remote.set(id, { toteId: track.toteId, binding: track.binding })
      }
      if (this.remote.size === 0) return
      for (const id of await leases.acquire([...this.remote.keys()])) {
        const { toteId, binding } = this.remote.get(id)!
        this.remote.delete(id)
        logger.info({ delivery_id: id }, 'cold-chain monitor: took over the evaluation of this delivery')
        await this.load(toteId, binding).catch((err: unknown) =>
          logger.warn({ err, delivery_id: id }, 'cold-chain monitor: loading a delivery taken over failed'),
        )
      }
    })()
      .catch((err: unknown) => logger.warn({ err }, 'cold-chain monitor: renewing evaluation leases failed'))
      .finally(() => (this.sweeping = null))
  }

  /** Gives up this copy's leases (all of them, or these deliveries'). */
  async release(deliveryIds?: readonly string[]): Promise<void> {
    if (deliveryIds === undefined) await this.sweeping
    await this.deps.leases?.release(deliveryIds)
  }
}
