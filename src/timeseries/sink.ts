/**
 * The time-series port (STYLE §4): where tote readings are stored and read back. Three adapters,
 * SQLite (embedded default), PostgreSQL (`DATABASE_URL` without `QUESTDB_CONFIG`: shared by every
 * copy of the service) and QuestDB (`QUESTDB_CONFIG`), pass the same contract tests
 * (test/timeseries/sink-contract.ts).
 *
 * Time ranges are half-open, `fromMs <= ts < toMs`, in epoch ms of event time.
 */

export type ReadingRow = {
  tote_id: string
  /** The delivery whose binding interval contains `ts`; null when the tote was not bound. */
  delivery_id: string | null
  rx_id: string | null
  /** Event time (the sensor's clock), epoch ms. With `tote_id`, the row's identity. */
  ts: number
  temp_c: number
  /** State of charge, 0..1. */
  battery: number | null
  /** Relative humidity, %. */
  humidity: number | null
  lat: number | null
  lng: number | null
  seq: number | null
  /** When the broker received it, epoch ms. */
  received_at: number
  /** Arrived after the rule engine had already evaluated past its `ts` (rules/README.md, Semantics). */
  late: boolean
}

/** One step of a temperature trace (`GET /v1/deliveries/{id}/temperature`). */
export type TemperatureBucket = {
  /** Bucket start, epoch ms; buckets are aligned to multiples of the step since the epoch. */
  t: number
  min: number
  max: number
  avg: number
  /** Readings in the bucket; empty buckets are not returned. */
  n: number
}

/**
 * What one expiry pass may remove (docs/operations.md, Retention). Expiry is decided at the time
 * of the pass from the binding each stored reading has then.
 */
export type ExpiryRequest = {
  /** Readings bound to no delivery with `ts` before this go (RETENTION_UNBOUND_DAYS). */
  unboundBeforeMs: number
  /** Readings bound to a delivery with `ts` before this go (RETENTION_RECORDS_DAYS), unless kept below. */
  boundBeforeMs: number
  /** Deliveries whose readings stay whatever their age: still open, or ended inside their retention. */
  keepDeliveries: ReadonlySet<string>
  /** At most about this many readings in one pass, so writes never wait long behind it. */
  limit: number
}

/**
 * What one `expire` batch did: readings removed, whether more may be left, and `deferred` when the
 * store asked to wait and tried nothing (SQLite, while its WAL checkpoints are behind ingest).
 */
export type ExpiryResult = { removed: number; more: boolean; deferred?: boolean }

export interface ReadingSink {
  /**
   * Writes the adapter can keep in flight at once (GroupCommitter hides commit latency with them);
   * 1 when absent. Their rows are acknowledged, and judged, in the order the writes were made.
   */
  readonly concurrentWrites?: number
  /**
   * Stores rows. Resolves only once they are durably stored, so a QoS 1 PUBACK may follow
   * Idempotent on (tote_id, ts): writing a row again never adds a second one. Which
   * copy survives is adapter-specific (SQLite keeps the first, QuestDB's DEDUP the last); both
   * are retransmissions of one measurement.
   */
  write(rows: readonly ReadingRow[]): Promise<void>
  /**
   * Makes stored rows follow a binding that was created or ended after they were written (a
   * dispatch or an end with an earlier `occurred_at`): the tote's rows with no delivery
   * and `fromMs <= ts < toMs` become the delivery's; the delivery's rows outside that interval
   * lose it. `toMs` null: the delivery is still open. Resolves once reads show the change, with
   * whether any row became the delivery's.
   */
  attribute(toteId: string, binding: { deliveryId: string; rxId: string; fromMs: number; toMs: number | null }): Promise<boolean>
  /** A delivery's readings in ts order. */
  readingsForDelivery(deliveryId: string, fromMs: number, toMs: number): Promise<ReadingRow[]>
  /**
   * The delivery's newest reading in [fromMs, toMs), or null: one row however long the range, so a
   * custody event reads its handoff temperature with one indexed lookup (docs/api.md, Temperature at each handoff).
   */
  latestForDelivery(deliveryId: string, fromMs: number, toMs: number): Promise<ReadingRow | null>
  /** A delivery's trace in steps of `stepMs`, oldest first. */
  bucketed(deliveryId: string, fromMs: number, toMs: number, stepMs: number): Promise<TemperatureBucket[]>
  /** A tote's readings in ts order, bound or not; rebuilds rule state after a restart. */
  readingsForTote(toteId: string, fromMs: number, toMs: number): Promise<ReadingRow[]>
  /** Rows stored: reads every partition, so a test's or a benchmark's question, never a probe's. */
  count(): Promise<number>
  /** Answers when the store can be read (`/readyz`): one trivial statement, whatever its size. */
  ping(): Promise<void>
  /** Removes one batch of expired readings. An adapter without it keeps every reading. */
  expire?(request: ExpiryRequest): Promise<ExpiryResult>
  /** Waits for writes in progress, then releases the store. */
  close(): Promise<void>
}

/** Rejects a step that would make a nonsense or unbounded trace. */
export function assertStep(stepMs: number): void {
  if (!Number.isSafeInteger(stepMs) || stepMs < 1) throw new RangeError(`step must be a whole number of ms >= 1, got ${stepMs}`)
}
