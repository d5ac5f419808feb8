import { CompiledQuery, sql, type Compilable, type Insertable } from 'kysely'
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

/** An insert's SQL text for one column list and row count. */
type InsertShape = { columns: readonly string[]; rowCount: number; text: string }

// Dialect → table → the shapes compiled so far. A table is inserted in a few shapes, found by
// comparing column names: cheaper than joining them into a key on every insert.
const insertsFor = new WeakMap<object, Map<string, InsertShape[]>>()
// Past this many shapes of one table, the oldest is forgotten (a shape is recompiled if it comes back).
const SHAPES_PER_TABLE = 64

/** `insert into <table> (<the row's columns>) values (…)`, compiled once per table and column list. */
export async function insertRow<T extends keyof Database & string>(
  executor: Executor,
  table: T,
  row: Insertable<Database[T]>,
): Promise<void> {
  const columns = definedColumns(row)
  const text = insertText(executor, table, columns, 1)
  await executor.executeQuery(
    CompiledQuery.raw(
      text,
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
      const text = insertText(executor, table, columns, chunk.length)
      const parameters = chunk.flatMap((row) => columns.map((column) => (row as Record<string, unknown>)[column] ?? null))
      await executor.executeQuery(CompiledQuery.raw(text, parameters))
      start += size
    }
  }
}

const definedColumns = (row: object) => Object.keys(row).filter((column) => (row as Record<string, unknown>)[column] !== undefined)

function insertText(executor: Executor, table: keyof Database & string, columns: string[], rowCount: number): string {
  const dialect = dialectOf(executor)
  let tables = insertsFor.get(dialect)
  if (!tables) insertsFor.set(dialect, (tables = new Map()))
  let shapes = tables.get(table)
  if (!shapes) tables.set(table, (shapes = []))
  for (const shape of shapes) if (shape.rowCount === rowCount && sameNames(shape.columns, columns)) return shape.text
  // The SQL kysely's insertInto(table).values(rows) compiles to, a placeholder for every column
  // of every row; written with sql`` because the values are bound later, not typed here.
  const names = sql.join(columns.map((column) => sql.ref(column)))
  const row = sql`(${sql.join(columns.map(() => null))})`
  const rows = sql.join(Array.from({ length: rowCount }, () => row))
  const text = sql`insert into ${sql.table(table)} (${names}) values ${rows}`.compile(executor).sql
  if (shapes.length >= SHAPES_PER_TABLE) shapes.shift()
  shapes.push({ columns, rowCount, text })
  return text
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}
