import type SqliteDatabase from 'better-sqlite3'

/** Turns one row of a statement in raw mode (its values in column order) into an object. */
type RowBuilder = ((values: unknown[]) => Record<string, unknown>) & { width: number }

/**
 * Reads a statement's rows as objects, faster than better-sqlite3 makes them.
 *
 * better-sqlite3 builds each row object property by property in C++, which costs ~0.4 µs a column:
 * 12 µs for one row of `deliveries` (28 columns), 0.7 ms for a page of 51, more than the rest of
 * the query. Read as arrays (raw mode) and turned into objects by a function made once per
 * statement from its column names, so every row is one object literal of a fixed shape, the same
 * rows cost less than half. The objects are the ones better-sqlite3 would have made: the same own
 * properties in the same order, a later column of the same name winning.
 */
export class SqliteRowReader {
  private builders = new WeakMap<SqliteDatabase.Statement, RowBuilder | null>()

  all(statement: SqliteDatabase.Statement, parameters: readonly unknown[]): unknown[] {
    const builder = this.builders.get(statement)
    if (builder === null) return statement.all(parameters)
    // New, or the schema changed since: read as better-sqlite3 does, then learn the columns. They
    // are learnt after the read, as SQLite re-prepares a statement made stale by a schema change
    // only when it runs, and names the old columns until then.
    if (builder === undefined) {
      statement.raw(false)
      const objects = statement.all(parameters)
      this.learn(statement)
      return objects
    }
    const rows = statement.all(parameters) as unknown[][]
    // A schema change by another connection shows only here, as a row of another width.
    if (rows.length > 0 && rows[0]!.length !== builder.width) return this.forgetOne(statement, parameters)
    const objects: unknown[] = rows
    for (let i = 0; i < rows.length; i++) objects[i] = builder(rows[i]!)
    return objects
  }

  /** Forgets every statement's columns: after a schema change, a statement's `*` may name others. */
  forget(): void {
    this.builders = new WeakMap()
  }

  private learn(statement: SqliteDatabase.Statement): void {
    const names = statement.columns().map((column) => column.name)
    // `__proto__` in an object literal sets the prototype instead of a property: leave such rows to better-sqlite3.
    const builder = names.includes('__proto__') ? null : rowBuilder(names)
    this.builders.set(statement, builder)
    statement.raw(builder !== null)
  }

  private forgetOne(statement: SqliteDatabase.Statement, parameters: readonly unknown[]): unknown[] {
    this.builders.delete(statement)
    return this.all(statement, parameters)
  }
}

function rowBuilder(names: string[]): RowBuilder {
  // Column names come from the schema and the service's own SQL; JSON.stringify quotes any of them safely.
  const body = `return {${names.map((name, i) => `${JSON.stringify(name)}: values[${i}]`).join(', ')}}`
  const build = new Function('values', body) as RowBuilder
  build.width = names.length
  return build
}
