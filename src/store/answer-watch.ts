import pg from 'pg'

/**
 * Whether PostgreSQL answers at all. A partition (packets dropped, nothing refused) gives a query
 * on an open connection no answer and no error; a slow statement looks the same from here. So the
 * rule is about the database, not the query: a query gives up once the database has been silent
 * for the whole deadline (no query, new connection or probe answered in that time), and while
 * queries wait on a silent database a probe (`select 1` on a new connection) asks whether it is
 * still there. A slow statement on a database that answers others keeps its statement deadline.
 *
 * Once a query gave up, the database counts as silent: new queries and connections are refused at
 * once (503 at once, rather than each request waiting its own deadline) until a probe answers.
 */
export class AnswerWatch {
  private lastAnswer: number
  private silent = false
  private probing: Promise<void> | null = null

  constructor(
    /** `select 1` on a connection of its own; rejects when it gets no answer in time. */
    private readonly probe: () => Promise<void>,
    /** `DATABASE_CONNECT_TIMEOUT_MS`: how long a database may be silent before it counts as gone. */
    private readonly deadlineMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.lastAnswer = now()
  }

  /** Something came back from the database: an answer, an error it sent, a new connection. */
  answered(): void {
    this.lastAnswer = this.now()
    this.silent = false
  }

  /**
   * `pool.query` under the watch. A connection whose query was given up on (or failed) is
   * destroyed at once, as `pool.query` does with a failed one; left checked out until its read
   * timeout it would hold a place in the pool, and `pool.end()` would wait for it.
   */
  async query<R extends pg.QueryResultRow>(pool: pg.Pool, query: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    this.checkAnswering()
    const client = await pool.connect()
    let failure: Error | undefined
    try {
      return await this.wait(client.query<R>(query))
    } catch (error) {
      failure = error instanceof Error ? error : new Error(String(error))
      throw error
    } finally {
      client.release(failure)
    }
  }

  /** Refuses at once while the database counts as silent (and asks it again in the background). */
  checkAnswering(): void {
    if (!this.silent) return
    this.probeSoon()
    throw noAnswer(this.deadlineMs)
  }

  /**
   * The query's answer, or `noAnswer` once the database has been silent for the deadline (the
   * query's connection must then be discarded: its answer may still come, or never).
   */
  wait<T>(query: Promise<T>): Promise<T> {
    const started = this.now()
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined
      let settled = false
      const check = () => {
        if (settled) return
        const silentFor = this.now() - Math.max(this.lastAnswer, started)
        if (silentFor >= this.deadlineMs) {
          settled = true
          this.silent = true
          return reject(noAnswer(this.deadlineMs))
        }
        // A quarter of the deadline without a word: ask, so a live database shows it in time.
        if (silentFor >= this.deadlineMs / 4) this.probeSoon()
        timer = setTimeout(check, Math.min(this.deadlineMs / 4, this.deadlineMs - silentFor))
        timer.unref()
      }
      timer = setTimeout(check, this.deadlineMs / 4)
      timer.unref()
      query.then(
        (value) => {
          this.answered()
          if (settled) return
          settled = true
          clearTimeout(timer)
          resolve(value)
        },
        (error: unknown) => {
          // An error the server sent is an answer too; a client-side timeout or a cut connection is not.
          if ((error as { code?: unknown } | null)?.code !== undefined && typeof (error as { severity?: unknown }).severity === 'string')
            this.answered()
          if (settled) return
          settled = true
          clearTimeout(timer)
          reject(error)
        },
      )
    })
  }

  /** One probe at a time, whoever asks. */
  private probeSoon(): void {
    this.probing ??= this.probe()
      .then(
        () => this.answered(),
        () => {},
      )
      .finally(() => (this.probing = null))
  }
}

/** What a query gets when the database is silent: `isStoreUnavailable` makes it a 503 `not_ready`. */
const noAnswer = (deadlineMs: number) => new Error(`Database did not answer within ${deadlineMs} ms`)

export const isNoAnswer = (error: Error) => /^Database did not answer within/.test(error.message)

/** A watch over one pool's connections to `url` (a new connection counts as an answer). */
export function watchPool(pool: pg.Pool, url: string, deadlineMs: number): AnswerWatch {
  const watch = new AnswerWatch(() => probeDatabase(url, deadlineMs), deadlineMs)
  pool.on('connect', () => watch.answered())
  return watch
}

/** `select 1` on a connection of its own, within the deadline: is the database there at all? */
async function probeDatabase(url: string, deadlineMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: deadlineMs, query_timeout: deadlineMs })
  client.on('error', () => {}) // a probe that fails says so by rejecting
  try {
    await client.connect()
    await client.query('select 1')
  } finally {
    void client.end().catch(() => {})
  }
}
