import { ReorderBuffer, type PushResult } from '../../../rules/index.js'
import type { ReadingRow } from '../../timeseries/sink.js'

/** One event-time reorder window per tote (REORDER_WINDOW_S; rules/reorder.ts). */
export class ToteReorderBuffers {
  private readonly buffers = new Map<string, ReorderBuffer<ReadingRow>>()

  constructor(private readonly windowMs: number) {}

  push(row: ReadingRow, now: number): PushResult<ReadingRow> {
    return this.of(row.tote_id).push(row, now)
  }

  /** Readings still waiting for the tote's window. */
  waiting(toteId: string): number {
    return this.buffers.get(toteId)?.size ?? 0
  }

  /** The readings the tote's window holds, ascending ts (a view, valid until its next push or release). */
  held(toteId: string): readonly ReadingRow[] {
    return this.buffers.get(toteId)?.held() ?? []
  }

  /** What the totes that went quiet for a window release, one array per tote. */
  releaseSilent(now: number): (readonly ReadingRow[])[] {
    return [...this.buffers.values()].map((buffer) => buffer.flushSilent(now))
  }

  /** Everything the tote's window holds (its delivery ended). */
  releaseTote(toteId: string): readonly ReadingRow[] {
    return this.buffers.get(toteId)?.flushAll() ?? []
  }

  /** Everything every window holds (a stop). */
  releaseAll(): (readonly ReadingRow[])[] {
    return [...this.buffers.values()].map((buffer) => buffer.flushAll())
  }

  private of(toteId: string): ReorderBuffer<ReadingRow> {
    let buffer = this.buffers.get(toteId)
    if (!buffer) this.buffers.set(toteId, (buffer = new ReorderBuffer<ReadingRow>(this.windowMs)))
    return buffer
  }
}
