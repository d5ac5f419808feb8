import type { Logger } from 'pino'
import type { Clock } from '../clock.js'
import type { Metrics } from '../metrics.js'
import type { ReadingRow } from '../timeseries/sink.js'
import { bindingAt, type Binding, type ToteBindings } from './bindings.js'
import type { ColdChainMonitor } from './cold-chain-monitor.js'
import type { GroupCommitter } from './group-commit.js'
import { parseReadings, type ParsedReading } from './parse.js'

/** A payload the pipeline refused; its message is the reason published on the tote's errors topic. */
export class ReadingsRejected extends Error {
  constructor(readonly code: string, reason: string) {
    super(reason)
  }
}

/**
 * The ingest flow of SPEC §4, one publish at a time:
 * parse → bind to delivery → persist (group commit) → evaluate → emit.
 * It resolves once the readings are committed, which is when the broker may PUBACK; evaluation
 * follows on the committed rows.
 */
export class IngestPipeline {
  constructor(private readonly deps: {
    bindings: ToteBindings; committer: GroupCommitter; monitor: ColdChainMonitor; clock: Clock; metrics: Metrics; logger: Logger
  }) {}

  async handle(toteId: string, payload: Buffer): Promise<void> {
    const now = this.deps.clock.now()
    const parsed = parseReadings(payload, now)
    if (!parsed.ok) {
      // Counted here; the broker logs it (sampled under a flood) and tells the tote.
      this.deps.metrics.readingsRejected.inc({ code: parsed.code })
      throw new ReadingsRejected(parsed.code, parsed.reason)
    }
    const { rows, bindings } = await this.bind(toteId, parsed.readings, now)
    await this.deps.monitor.prepare(rows, bindings)
    await this.deps.committer.write(rows)
    this.deps.metrics.readingsIngested.inc(rows.length)
    this.deps.monitor.accept(rows)
  }

  private async bind(toteId: string, readings: readonly ParsedReading[], receivedAt: number) {
    const intervals = await this.deps.bindings.forTote(toteId)
    const bindings = new Map<string, Binding>()
    const rows: ReadingRow[] = readings.map((r) => {
      const binding = bindingAt(intervals, r.ts)
      if (binding) bindings.set(binding.deliveryId, binding)
      return {
        tote_id: toteId, delivery_id: binding?.deliveryId ?? null, rx_id: binding?.rxId ?? null, ts: r.ts, temp_c: r.temp_c,
        battery: r.battery, humidity: r.humidity, lat: r.lat, lng: r.lng, seq: r.seq, received_at: receivedAt, late: false,
      }
    })
    return { rows, bindings }
  }
}
