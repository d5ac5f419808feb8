import type SqliteDatabase from 'better-sqlite3'

/** Turns one row of a statement in raw mode (its values in column order) into an object. */
type RowBuilder = (values: unknown[]) => Record<string, unknown>

/**
 * Reads the rows of statements in raw mode as objects, faster than better-sqlite3 makes them.
 *
 * better-sqlite3 builds each row object property by property in C++, which costs ~0.4 µs a column:
 * 12 µs for one row of `deliveries` (28 columns), 0.7 ms for a page of 51, more than the rest of
 * the query. Read as arrays (raw mode) and turned into objects by a function made once per
 * statement from its column names, so every row is one object literal of a fixed shape, the same
 * rows cost less than half. The objects are the ones better-sqlite3 would have made: the same
 * properties in the same order, a later column of the same name winning.
 */
export class SqliteRowReader {
  private builders = new WeakMap<SqliteDatabase.Statement, RowBuilder>()
  private readonly schemaVersion: SqliteDatabase.Statement
  private builtAt: unknown

  constructor(database: SqliteDatabase.Database) {
    this.schemaVersion = database.prepare('pragma schema_version').pluck()
    this.builtAt = this.schemaVersion.get()
  }

  /** The rows of `statement`, which must be in raw mode. */
  all(statement: SqliteDatabase.Statement, parameters: readonly unknown[]): unknown[] {
    const rows = statement.all(parameters) as unknown[][]
    if (rows.length === 0) return rows
    // A schema change (made here, rolled back, or by another connection) re-prepares a statement
    // when it next runs, and its `*` may then name other columns: start over. Checked after the
    // read, which is when SQLite has re-prepared it (its column names are the old ones until then).
    const version = this.schemaVersion.get()
    if (version !== this.builtAt) {
      this.builtAt = version
      this.builders = new WeakMap()
    }
    let builder = this.builders.get(statement)
    if (!builder) this.builders.set(statement, (builder = rowBuilder(statement.columns().map((column) => column.name))))
    const objects: unknown[] = rows // each row's array is replaced by its object, in place
    for (let i = 0; i < rows.length; i++) objects[i] = builder(rows[i]!)
    return objects
  }
}

function rowBuilder(names: string[]): RowBuilder {
  // Column names come from the schema and the service's own SQL; JSON.stringify quotes any of them
  // safely. A column named `__proto__` sets the prototype here as better-sqlite3's own objects do.
  return new Function('values', `return {${names.map((name, i) => `${JSON.stringify(name)}: values[${i}]`).join(', ')}}`) as RowBuilder
}
