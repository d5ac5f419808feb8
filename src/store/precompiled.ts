import { CompiledQuery, type Compilable, type Insertable } from 'kysely'
import type { Database, Executor } from './schema.js'

/*
 * Queries on the request hot path, compiled once per dialect instead of on every call.
 *
 * Kysely builds an immutable query tree and compiles it to SQL for every execution: 10–20 µs
 * for a wide insert or a select with a few conditions, more than SQLite needs to run it. The
 * SQL text of these queries never changes, only their values, so we let kysely compile each
 * one once (per dialect: SQLite's `?` and PostgreSQL's `$1` differ) and afterwards only bind
 * values. The query is still written with kysely, typed against the schema.
 */

const ARGUMENT = '\u0000rxtrace-argument-'

type Slot = { argument: number } | { constant: unknown }
type Compiled = { sql: string; slots: Slot[] }

/** One compilation per dialect: transactions and the database share their dialect's adapter. */
const dialectOf = (executor: Executor): object => executor.getExecutor().adapter

/**
 * A query whose arguments are scalars (strings, numbers, null), compiled on first use:
 * `const byId = precompiled((db, id: string) => db.selectFrom('t').selectAll().where('id', '=', id))`
 * then `await byId(executor, 'x')` returns the rows. Not for arrays (`in (…)` lists vary in length).
 */
export function precompiled<A extends unknown[], R>(build: (db: Executor, ...args: A) => Compilable<R>) {
  const compiledFor = new WeakMap<object, Compiled>()
  return async (executor: Executor, ...args: A): Promise<R[]> => {
    const dialect = dialectOf(executor)
    let compiled = compiledFor.get(dialect)
    if (!compiled) {
      // Compile with a marker in place of each argument, then find where each one went.
      const markers = args.map((_, i) => `${ARGUMENT}${i}`) as A
      const query = build(executor, ...markers).compile()
      const slots = query.parameters.map((value): Slot => {
        const argument = typeof value === 'string' && value.startsWith(ARGUMENT) ? Number(value.slice(ARGUMENT.length)) : -1
        return argument >= 0 ? { argument } : { constant: value }
      })
      compiled = { sql: query.sql, slots }
      compiledFor.set(dialect, compiled)
    }
    const parameters = compiled.slots.map((slot) => ('argument' in slot ? args[slot.argument] : slot.constant))
    const result = await executor.executeQuery<R>(CompiledQuery.raw(compiled.sql, parameters))
    return result.rows
  }
}

const insertsFor = new WeakMap<object, Map<string, string>>()

/** `insert into <table> (<the row's columns>) values (…)`, compiled once per table and column list. */
export async function insertRow<T extends keyof Database & string>(
  executor: Executor,
  table: T,
  row: Insertable<Database[T]>,
): Promise<void> {
  const columns = definedColumns(row)
  const sql = insertText(executor, table, columns, [row])
  await executor.executeQuery(
    CompiledQuery.raw(
      sql,
      columns.map((column) => (row as Record<string, unknown>)[column]),
    ),
  )
}

/**
 * Rows of one shape (the first row's keys; an undefined value is written as null), in chunks of
 * 128, 64, …, 1 rows: a batch of any size is at most eight statements, and at most eight SQL
 * texts per table are ever compiled.
 */
export async function insertRows<T extends keyof Database & string>(
  executor: Executor,
  table: T,
  rows: Insertable<Database[T]>[],
): Promise<void> {
  if (rows.length === 0) return
  const columns = Object.keys(rows[0]!)
  let start = 0
  for (let size = 128; size >= 1; size >>= 1) {
    while (rows.length - start >= size) {
      const chunk = rows.slice(start, start + size)
      const sql = insertText(executor, table, columns, chunk)
      const parameters = chunk.flatMap((row) => columns.map((column) => (row as Record<string, unknown>)[column] ?? null))
      await executor.executeQuery(CompiledQuery.raw(sql, parameters))
      start += size
    }
  }
}

const definedColumns = (row: object) => Object.keys(row).filter((column) => (row as Record<string, unknown>)[column] !== undefined)

function insertText(executor: Executor, table: keyof Database & string, columns: string[], rows: object[]): string {
  const dialect = dialectOf(executor)
  let texts = insertsFor.get(dialect)
  if (!texts) insertsFor.set(dialect, (texts = new Map()))
  const key = `${table}(${columns.join(',')})x${rows.length}`
  let sql = texts.get(key)
  if (sql === undefined) {
    // Compiled from rows holding null where a value is undefined, so every column gets its placeholder.
    const shaped = rows.map((row) =>
      Object.fromEntries(columns.map((column) => [column, (row as Record<string, unknown>)[column] ?? null])),
    )
    sql = executor
      .insertInto(table)
      .values(shaped as never)
      .compile().sql
    texts.set(key, sql)
  }
  return sql
}
