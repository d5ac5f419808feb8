/** Messages between test/bench/ingest.ts and its publisher child (test/bench/lib/ingest-publisher.ts), over Node IPC. */

export type ToteCredentials = { id: string; username: string; password: string }

export type Phase = {
  name: string
  durationMs: number
  /** Readings per publish: 1 is a plain reading object, more is a JSON array (a gateway batch). */
  batch: number
  /** Publishes each tote keeps in flight (sent, PUBACK not yet back). */
  window: number
  /** Publishes per second over all totes; omitted = closed loop (each PUBACK triggers the next publish). */
  rate?: number
  /** Only the first `totes` connected totes publish; default all. */
  totes?: number
  /**
   * Cold-chain breaks: every `everyMs`, the next tote of `toteIds` publishes one reading at
   * `tempC` (below the profile's hard_min_c), and its publish time is reported.
   */
  breaks?: { toteIds: string[]; everyMs: number; tempC: number }
}

export type PhaseResult = {
  name: string
  elapsedMs: number
  publishes: number
  acked: number
  ackedReadings: number
  errors: number
  /** Readings refused by the service (reported on the tote's errors topic). */
  rejected: number
  /** Publishes the pacer wanted to send but every tote's window was full. */
  behind: number
  latency: { p50: number; p90: number; p99: number; p999: number; max: number; n: number }
  /** Per second of the phase: PUBACKed readings. */
  perSecond: number[]
  breaks: { toteId: string; publishedAtMs: number; ackedAtMs: number | null }[]
}

export type ToPublisher =
  | { type: 'connect'; url: string; totes: ToteCredentials[]; subscribeErrors: boolean; parallel: number; wire: 'raw' | 'mqttjs' }
  | { type: 'run'; phase: Phase }
  | { type: 'disconnect' }

export type FromPublisher =
  | { type: 'connected'; connected: number; failed: number; ms: number; firstError?: string }
  | { type: 'result'; result: PhaseResult }
  | { type: 'disconnected'; totals: { acked: number; ackedReadings: number; errors: number; rejected: number } }
  | { type: 'error'; message: string }
