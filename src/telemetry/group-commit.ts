import type { ReadingRow, ReadingSink } from '../timeseries/sink.js'

type Waiter = { resolve: () => void; reject: (error: Error) => void }

// A write on its way this long is taken as stuck (a store that never answers): its rows no longer
// keep their totes from being judged silent (storingTotes).
const STUCK_MS = 30_000

/** Told the rows of each committed group, in commit order, before their publishes are acknowledged. */
export type CommittedListener = (rows: readonly ReadingRow[]) => void

/**
 * Group commit: readings from many publishes are gathered for a few milliseconds
 * (INGEST_GATHER_MS) and written in one transaction; every publish in the group is acknowledged
 * when it commits.
 *
 * Up to the sink's `concurrentWrites` groups are written at once (one for SQLite, a few for
 * PostgreSQL and QuestDB, whose commit is a round trip that would otherwise cap the rate at one
 * group per round trip). Groups finish in the order they were made: a group that committed
 * waits for the groups before it, so listeners see groups, and publishes are acknowledged, in
 * that order whatever order the sink answered in. With every slot busy the rows gather, so a
 * slow sink naturally makes the next group bigger.
 */
export class GroupCommitter {
  private rows: ReadingRow[] = []
  private waiters: Waiter[] = []
  private timer: NodeJS.Timeout | null = null
  /** Groups being written. */
  private inFlight = 0
  /** Their rows, oldest group first, with when each began. */
  private readonly writing: { rows: readonly ReadingRow[]; since: number }[] = []
  /** Settles when the newest group made so far has finished (committed or failed), and every one before it. */
  private last: Promise<void> = Promise.resolve()
  private readonly listeners: CommittedListener[] = []
  private readonly slots: number

  constructor(
    private readonly sink: ReadingSink,
    /** How long the first reading of a group waits for company. */
    private readonly maxDelayMs = 2,
    /** A group this big is written at once. */
    private readonly maxRows = 10_000,
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    this.slots = Math.max(1, sink.concurrentWrites ?? 1)
  }

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

  /**
   * The totes with rows handed to write() and not yet committed and judged (gathered, or in a group
   * being written): their readings are on their way. None while the oldest write has been on its
   * way STUCK_MS. Read once a second by the sensor-gap check, never per publish.
   */
  storingTotes(): Set<string> {
    const totes = new Set<string>()
    const oldest = this.writing[0]
    if (oldest && this.nowMs() - oldest.since >= STUCK_MS) return totes
    for (const group of this.writing) for (const row of group.rows) totes.add(row.tote_id)
    for (const row of this.rows) totes.add(row.tote_id)
    return totes
  }

  /** Resolves once every row handed to write() before this call is committed (or has failed). */
  async settled(): Promise<void> {
    if (this.rows.length > 0)
      await this.write([]).catch(() => undefined) // joins the group being gathered
    else await this.last
  }

  /** Writes whatever is gathered and waits for every write in progress. */
  async drain(): Promise<void> {
    while (this.inFlight > 0 || this.rows.length) {
      if (this.rows.length && this.inFlight < this.slots) this.flush()
      else await this.last
    }
  }

  private flushSoon(delayMs: number): void {
    if (this.inFlight >= this.slots) return // the write that ends next schedules the next group
    if (delayMs === 0) {
      if (this.timer) clearTimeout(this.timer)
      this.timer = null
      this.flush()
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = null
        this.flush()
      }, delayMs)
    }
  }

  private flush(): void {
    if (this.inFlight >= this.slots || this.rows.length === 0) return
    const rows = this.rows
    const waiters = this.waiters
    this.rows = []
    this.waiters = []
    this.inFlight++
    this.writing.push({ rows, since: this.nowMs() })
    const before = this.last
    const written = this.sink.write(rows).then(
      () => null,
      (error: unknown) => error as Error,
    )
    // The slot is free as soon as the sink answered; the answer is passed on in order.
    void written.then(() => {
      this.inFlight--
      if (this.rows.length) this.flushSoon(this.rows.length >= this.maxRows ? 0 : this.maxDelayMs)
    })
    this.last = Promise.all([written, before]).then(([error]) => this.finish(rows, waiters, error))
  }

  private finish(rows: ReadingRow[], waiters: Waiter[], error: Error | null): void {
    this.writing.shift() // groups finish in the order they were made: this is the oldest
    if (error !== null) {
      for (const w of waiters) w.reject(error)
      return
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
