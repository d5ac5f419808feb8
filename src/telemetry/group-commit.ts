import type { ReadingRow, ReadingSink } from '../timeseries/sink.js'

type Waiter = { resolve: () => void; reject: (error: Error) => void }

/** Told the rows of each committed group, in commit order, before their publishes are acknowledged. */
export type CommittedListener = (rows: readonly ReadingRow[]) => void

/**
 * Group commit: readings from many publishes are gathered for a few milliseconds and
 * written in one transaction; every publish in the group is acknowledged when it commits. One
 * write at a time, so a slow write naturally makes the next group bigger.
 */
export class GroupCommitter {
  private rows: ReadingRow[] = []
  private waiters: Waiter[] = []
  private timer: NodeJS.Timeout | null = null
  private writing: Promise<void> | null = null
  private readonly listeners: CommittedListener[] = []

  constructor(
    private readonly sink: ReadingSink,
    /** How long the first reading of a group waits for company. */
    private readonly maxDelayMs = 2,
    /** A group this big is written at once. */
    private readonly maxRows = 10_000,
  ) {}

  /** Resolves once `rows` are durably stored. */
  write(rows: readonly ReadingRow[]): Promise<void> {
    for (const row of rows) this.rows.push(row)
    const committed = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }))
    if (this.rows.length >= this.maxRows) this.flushSoon(0)
    else this.flushSoon(this.maxDelayMs)
    return committed
  }

  /**
   * `listener` sees every committed group once, so per-group work (rule evaluation, counters)
   * runs once per transaction instead of once per publish. It must not throw: the rows are
   * committed whatever it does.
   */
  onCommitted(listener: CommittedListener): void {
    this.listeners.push(listener)
  }

  /** Resolves once every row handed to write() before this call is committed (or has failed). */
  async settled(): Promise<void> {
    if (this.rows.length > 0) await this.write([]).catch(() => undefined) // joins the group being gathered
    else await this.writing?.catch(() => undefined)
  }

  /** Writes whatever is gathered and waits for every write in progress. */
  async drain(): Promise<void> {
    while (this.writing || this.rows.length) {
      if (this.writing) await this.writing.catch(() => undefined)
      else await this.flush()
    }
  }

  private flushSoon(delayMs: number): void {
    if (this.writing) return // the write in progress schedules the next group when it ends
    if (delayMs === 0) {
      if (this.timer) clearTimeout(this.timer)
      this.timer = null
      void this.flush()
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = null
        void this.flush()
      }, delayMs)
    }
  }

  private async flush(): Promise<void> {
    if (this.writing || this.rows.length === 0) return
    const rows = this.rows
    const waiters = this.waiters
    this.rows = []
    this.waiters = []
    this.writing = this.sink.write(rows)
    try {
      await this.writing
    } catch (error) {
      for (const w of waiters) w.reject(error as Error)
      return
    } finally {
      this.writing = null
      if (this.rows.length) this.flushSoon(this.rows.length >= this.maxRows ? 0 : this.maxDelayMs)
    }
    for (const listener of this.listeners) {
      try {
        listener(rows)
      } catch {
        // A listener reports its own failures (see onCommitted); the rows stay committed and acknowledged.
      }
    }
    for (const w of waiters) w.resolve()
  }
}
