import type { Logger } from 'pino'
import { PayloadRefusedError } from '../../broker/errors.js'
import type { Clock } from '../clock.js'
import type { Metrics } from '../metrics.js'
import type { ReadingRow } from '../timeseries/sink.js'
import { bindingAt, type Binding, type ToteBindings } from './bindings.js'
import type { ColdChainMonitor } from './cold-chain-monitor.js'
import type { GroupCommitter } from './group-commit.js'
import { parseReadings, type ParsedReading } from './parse.js'

/** A payload the pipeline refused; its message is the reason published on the tote's errors topic. */
export class ReadingsRejected extends PayloadRefusedError {}

/**
 * The ingest flow (docs/architecture.md, Flows), one publish at a time:
 * parse → bind to delivery → persist (group commit) → evaluate → emit.
 * It resolves once the readings are committed, which is when the broker may PUBACK; evaluation
 * follows on the committed rows, once per committed group (the committer calls `evaluate`).
 *
 * Hot path (one call per publish, tens of thousands a second): the common case (bindings cached,
 * rule state loaded) takes no await before the group commit.
 */
export class IngestPipeline {
  constructor(
    private readonly deps: {
      bindings: ToteBindings
      committer: GroupCommitter
      monitor: ColdChainMonitor
      clock: Clock
      metrics: Metrics
      logger: Logger
    },
  ) {
    deps.committer.onCommitted((rows) => this.evaluate(rows))
  }

  /** Resolves once the payload's readings are committed; rejects with ReadingsRejected for a refused payload. */
  handle(toteId: string, payload: Buffer): Promise<void> {
    try {
      const now = this.deps.clock.now()
      const parsed = parseReadings(payload, now)
      if (!parsed.ok) {
        this.deps.metrics.readingsRejected.inc({ code: parsed.code })
        this.deps.logger.warn({ tote_id: toteId, code: parsed.code, reason: parsed.reason }, 'telemetry payload rejected')
        return Promise.reject(new ReadingsRejected(parsed.code, parsed.reason))
      }
      // Not async: on the hot path the only promise is the group commit's.
      let oldestTs = Infinity
      for (const r of parsed.readings) if (r.ts < oldestTs) oldestTs = r.ts
      const intervals = this.deps.bindings.cached(toteId, oldestTs)
      if (intervals === undefined)
        return this.deps.bindings.forTote(toteId, oldestTs).then((loaded) => this.store(toteId, parsed.readings, loaded, now))
      return this.store(toteId, parsed.readings, intervals, now)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  private store(toteId: string, readings: readonly ParsedReading[], intervals: readonly Binding[], now: number): Promise<void> {
    const { rows, bindings } = this.bind(toteId, readings, intervals, now)
    const loading = this.deps.monitor.prepare(rows, bindings)
    return loading ? loading.then(() => this.deps.committer.write(rows)) : this.deps.committer.write(rows)
  }

  /** Committed rows, in commit order: counted, then judged by the rule engine. */
  private evaluate(rows: readonly ReadingRow[]): void {
    this.deps.metrics.readingsIngested.inc(rows.length)
    try {
      this.deps.monitor.accept(rows)
    } catch (err) {
      // Stored and acknowledged regardless; a restart rebuilds the rule state from the store.
      this.deps.logger.error({ err }, 'cold-chain evaluation failed')
    }
  }

  private bind(toteId: string, readings: readonly ParsedReading[], intervals: readonly Binding[], receivedAt: number) {
    // The deliveries these readings belong to: one in practice, rarely a few (a batch spanning a handover).
    const bindings: Binding[] = []
    const rows: ReadingRow[] = readings.map((r) => {
      const binding = bindingAt(intervals, r.ts)
      if (binding && !bindings.includes(binding)) bindings.push(binding)
      return {
        tote_id: toteId,
        delivery_id: binding?.deliveryId ?? null,
        rx_id: binding?.rxId ?? null,
        ts: r.ts,
        temp_c: r.temp_c,
        battery: r.battery,
        humidity: r.humidity,
        lat: r.lat,
        lng: r.lng,
        seq: r.seq,
        received_at: receivedAt,
        late: false,
      }
    })
    return { rows, bindings }
  }
}
