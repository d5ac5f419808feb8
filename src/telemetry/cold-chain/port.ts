import type { ColdChainState } from '../../../rules/index.js'
import type { NewEvent } from '../../events/outbox.js'
import type { ReadingRow } from '../../timeseries/sink.js'

/**
 * What the cold-chain monitor needs from the stores, and nothing else: a delivery's stored
 * readings, the break its saved summary already announced, and one write of summaries with the
 * events they raised. The SQL adapter is sql-store.ts; tests use an in-memory fake.
 */
export interface ColdChainStore {
  /**
   * Every stored reading of the delivery, in ts order. `urgent` for a load (readings wait for it),
   * not for a recompute: the adapter may serve urgent reads first.
   */
  readings(deliveryId: string, urgent: boolean): Promise<ReadingRow[]>
  /**
   * The break recorded in the delivery's saved summary, if any (the summary of a delivery that
   * raises a break is saved with the `cold-chain.break` event, see save).
   */
  announcedBreak(deliveryId: string): Promise<ColdChainState['broken']>
  /** The deliveries' summaries and the events, in one transaction: both or neither. */
  save(summaries: readonly { deliveryId: string; state: ColdChainState }[], events: readonly NewEvent[]): Promise<void>
}

/**
 * Who evaluates which delivery when several copies share one store (telemetry/evaluation-leases.ts).
 * Absent on one copy: it evaluates everything.
 */
export interface LeasePort {
  acquireOne(deliveryId: string): Promise<boolean>
  acquire(deliveryIds: readonly string[]): Promise<Set<string>>
  renew(): Promise<Set<string>>
  release(deliveryIds?: readonly string[]): Promise<void>
}
