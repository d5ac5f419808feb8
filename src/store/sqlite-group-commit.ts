import type SqliteDatabase from 'better-sqlite3'
import { CompiledQuery, SqliteDialect, type DatabaseConnection, type Driver, type QueryResult } from 'kysely'
import { SqliteRowReader } from './sqlite-rows.js'

// Distinct SQL texts the service runs are a few hundred; past this, start over rather than grow.
const STATEMENT_CACHE_LIMIT = 1_000
// A group is committed at the end of the event-loop turn that opened it, or sooner at this size.
const MAX_GROUP_UNITS = 256

/**
 * SQLite with group commit: the transactions of one event-loop turn share one physical
 * transaction, each inside its own SAVEPOINT, and commit together at the end of the turn.
 *
 * A commit writes every page the transaction dirtied to the WAL; concurrent creates touch the
 * same B-tree leaves, so twenty of them committed together write a fraction of twenty commits'
 * pages, and pay the commit's bookkeeping once.
 *
 * What callers see does not change: a transaction still runs alone (one at a time, as on
 * kysely's own SQLite driver), its failure rolls back only its own savepoint, and
 * `transaction().execute()` resolves only once the group's COMMIT is done, so nothing is
 * acknowledged before it is durable. If the COMMIT itself fails, every transaction of the group
 * fails. A write outside any transaction commits the open group with it before it returns. A
 * read outside any transaction (every API read) waits for the open group's COMMIT before it runs:
 * the connection is shared, so it would otherwise see writes that the COMMIT may still lose (a
 * failed COMMIT, a crash before it), and an answer must never show what was not committed.
 *
 * Statements are prepared once per SQL text: kysely prepares every query anew, and preparing
 * costs more than running our small statements. Rows are made into objects by `SqliteRowReader`.
 */
export class GroupCommitSqliteDialect extends SqliteDialect {
  constructor(private readonly database: SqliteDatabase.Database) {
    super({ database })
  }

  override createDriver(): Driver {
    return new GroupCommitDriver(this.database)
  }
}

type Waiter = { resolve: () => void; reject: (error: unknown) => void }

type Group = { units: number; waiters: Waiter[] }

/** One acquisition of the single connection: a transaction, or one query outside any. */
class Unit implements DatabaseConnection {
  released = false
  state: 'idle' | 'in-savepoint' | 'handed-over' = 'idle'

  constructor(private readonly driver: GroupCommitDriver) {}

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return this.driver.execute<R>(this, query)
  }

  async *streamQuery(): AsyncIterableIterator<QueryResult<never>> {
    throw new Error('streaming is not supported on the SQLite entity store')
  }
}

class GroupCommitDriver implements Driver {
  private readonly statements = new Map<string, SqliteDatabase.Statement>()
  private readonly rows: SqliteRowReader
  private readonly mutex = new FifoMutex()
  private group: Group | null = null
  private flushScheduled = false

  constructor(private readonly database: SqliteDatabase.Database) {
    this.rows = new SqliteRowReader(database)
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.mutex.lock()
    return new Unit(this)
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    const unit = connection as Unit
    this.joinGroup()
    this.run('savepoint unit')
    unit.state = 'in-savepoint'
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const unit = connection as Unit
    this.run('release unit')
    await this.handOver(unit)
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const unit = connection as Unit
    if (unit.state !== 'in-savepoint') return // its group already decided its fate
    unit.state = 'idle'
    // Some errors (I/O, disk full) make SQLite roll back the whole transaction, group and all.
    if (!this.database.inTransaction) return this.groupLost(transactionLost())
    this.run('rollback to unit')
    this.run('release unit')
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    this.release(connection as Unit)
  }

  async destroy(): Promise<void> {
    await this.flush()
    this.database.close()
  }

  execute<R>(unit: Unit, query: CompiledQuery): Promise<QueryResult<R>> {
    // A unit whose transaction SQLite rolled back must not go on in autocommit mode.
    if (unit.state === 'in-savepoint' && !this.database.inTransaction) throw transactionLost()
    const statement = this.prepare(query.sql)
    if (unit.state === 'idle' && this.group && statement.readonly)
      return this.afterOpenGroup().then(() => this.runStatement<R>(statement, unit, query))
    return this.runStatement<R>(statement, unit, query)
  }

  /**
   * Lets the open group commit before a read outside any transaction runs: gives up the
   * connection until the group's COMMIT is decided (whichever way), then takes it back. A group
   * opened meanwhile is committed at once rather than waited for, so a read waits one turn at most.
   */
  private async afterOpenGroup(): Promise<void> {
    const group = this.group
    if (!group) return
    const decided = new Promise<void>((resolve) => group.waiters.push({ resolve, reject: () => resolve() }))
    this.mutex.unlock()
    await decided
    await this.mutex.lock()
    try {
      this.commitGroup()
    } catch {
      // commitGroup rejected every transaction of that group; the read sees what did commit
    }
  }

  private runStatement<R>(statement: SqliteDatabase.Statement, unit: Unit, query: CompiledQuery): Promise<QueryResult<R>> {
    let result: QueryResult<R>
    try {
      if (statement.reader) result = { rows: this.rows.all(statement, query.parameters) as R[] }
      else {
        const { changes, lastInsertRowid } = statement.run(query.parameters)
        result = { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] }
      }
    } catch (error) {
      // Some errors (I/O, disk full) make SQLite roll back the whole transaction, group and all.
      if (this.group && !this.database.inTransaction) this.groupLost(error)
      throw error
    }
    // A write outside any transaction ran inside the open group: commit the group now, so the
    // write is durable when it returns (we hold the connection, so no savepoint is open).
    if (unit.state === 'idle' && !statement.readonly && this.group) this.commitGroup()
    return Promise.resolve(result)
  }

  /** Lets the next unit run while this one waits for its group's COMMIT. */
  private handOver(unit: Unit): Promise<void> {
    const group = this.group
    unit.state = 'handed-over'
    this.release(unit)
    if (!group) return Promise.reject(transactionLost())
    return new Promise<void>((resolve, reject) => group.waiters.push({ resolve, reject }))
  }

  private release(unit: Unit): void {
    if (unit.released) return
    unit.released = true
    this.mutex.unlock()
  }

  private joinGroup(): void {
    if (this.group && !this.database.inTransaction) this.groupLost(transactionLost()) // rolled back under us
    if (!this.group) {
      this.run('begin')
      this.group = { units: 0, waiters: [] }
    }
    this.group.units += 1
    if (this.group.units >= MAX_GROUP_UNITS) void this.flush()
    else if (!this.flushScheduled) {
      this.flushScheduled = true
      setImmediate(() => void this.flush())
    }
  }

  /** Commits the open group once the unit running now (if any) is done. */
  private async flush(): Promise<void> {
    this.flushScheduled = false
    await this.mutex.lock()
    try {
      this.commitGroup()
    } catch {
      // commitGroup rejected every transaction of the group with the error
    } finally {
      this.mutex.unlock()
    }
  }

  /** COMMIT, then answer everyone who waits for it; only while holding the connection. */
  private commitGroup(): void {
    const group = this.group
    if (!group) return
    this.group = null
    try {
      this.run('commit')
    } catch (error) {
      try {
        if (this.database.inTransaction) this.run('rollback')
      } finally {
        rejectAll(group, error)
      }
      throw error
    }
    for (const waiter of group.waiters) waiter.resolve()
  }

  private groupLost(error: unknown): void {
    const group = this.group
    this.group = null
    if (group) rejectAll(group, error)
  }

  private run(text: string): void {
    this.prepare(text).run()
  }

  private prepare(text: string): SqliteDatabase.Statement {
    let statement = this.statements.get(text)
    if (!statement) {
      if (this.statements.size >= STATEMENT_CACHE_LIMIT) this.statements.clear()
      statement = this.database.prepare(text)
      if (statement.reader) statement.raw(true) // rows as arrays, made into objects by `rows`
      this.statements.set(text, statement)
    }
    return statement
  }
}

const transactionLost = () => new Error('SQLite rolled back the transaction')

function rejectAll(group: Group, error: unknown): void {
  for (const waiter of group.waiters) waiter.reject(error)
}

/** Hands the single connection to waiters in arrival order. */
class FifoMutex {
  private locked = false
  private readonly queue: (() => void)[] = []

  lock(): Promise<void> {
    if (!this.locked) {
      this.locked = true
      return Promise.resolve()
    }
    return new Promise((resolve) => this.queue.push(resolve))
  }

  unlock(): void {
    const next = this.queue.shift()
    if (next) next()
    else this.locked = false
  }
}
