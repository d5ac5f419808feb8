/**
 * bench:history on PostgreSQL (`--database-url`): the year in a schema of its own, entities and
 * readings alike, built the way history-build.ts builds it on SQLite. What differs is here:
 *
 * - a lifecycle's rows are the rows whose `xmin` is newer than a mark taken before it, less those
 *   whose primary key was there already (a tote, a pharmacy the lifecycle updated);
 * - a copy leaves out the columns PostgreSQL fills itself (bigserial positions, the event feed's
 *   transaction id), so the copies' positions keep growing as the service's would;
 * - copies are written per table as multi-row inserts, a batch's rows and its progress in one
 *   transaction.
 */
import pg from 'pg'
import { createPool, DEFAULT_POSTGRES_LIMITS } from '../../../src/store/database.js'
import type { CapturedRows, CopyColumns } from './history-templates.js'

/** The PostgreSQL server (`--database-url`, no search_path of its own) and the schema a store lives in. */
export type PostgresTarget = { url: string; schema: string }

/** DATABASE_URL for the service: the server, with the store's schema as its search_path. */
export const serviceUrl = (t: PostgresTarget) => `${t.url}?options=${encodeURIComponent(`-c search_path=${t.schema}`)}`

/** A pool in the store's schema, as the service makes its own, without a statement timeout (a year's vacuum and count outlast it). */
export function postgresPool(t: PostgresTarget, max = 2): pg.Pool {
  return createPool(t.url, t.schema, { ...DEFAULT_POSTGRES_LIMITS, statementTimeoutMs: 0 }, () => {}, max)
}

/** Runs `statements` on the server, outside any schema. */
async function onServer(t: PostgresTarget, statements: string[]): Promise<void> {
  const admin = new pg.Client({ connectionString: t.url })
  await admin.connect()
  try {
    for (const statement of statements) await admin.query(statement)
  } finally {
    await admin.end()
  }
}

const dropStatement = (t: PostgresTarget) => `drop schema if exists "${t.schema}" cascade`

/** Makes the schema (the service migrates it on its first start); `fresh` drops an earlier one first. */
export const prepareSchema = (t: PostgresTarget, fresh: boolean) =>
  onServer(t, [...(fresh ? [dropStatement(t)] : []), `create schema if not exists "${t.schema}"`])

export const dropSchema = (t: PostgresTarget) => onServer(t, [dropStatement(t)])

/** Plain tables of the schema (the readings' partitioned table and its partitions are not a delivery's rows). */
async function plainTables(pool: pg.Pool, skip: ReadonlySet<string>): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(
    `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = current_schema() and c.relkind = 'r' and not c.relispartition order by 1`,
  )
  return rows.map((r) => r.name).filter((name) => !skip.has(name))
}

async function primaryKeys(pool: pg.Pool): Promise<Map<string, string[]>> {
  const { rows } = await pool.query<{ name: string; columns: string[] }>(
    `select c.relname as name, array_agg(a.attname::text order by k.ord) as columns
     from pg_index i
     join pg_class c on c.oid = i.indrelid
     join pg_namespace n on n.oid = c.relnamespace
     cross join lateral unnest(i.indkey) with ordinality as k(attnum, ord)
     join pg_attribute a on a.attrelid = c.oid and a.attnum = k.attnum
     where i.indisprimary and n.nspname = current_schema()
     group by c.relname`,
  )
  return new Map(rows.map((r) => [r.name, r.columns]))
}

export type PostgresMarks = { xid: number; keys: Map<string, { columns: string[]; before: Set<string> }> }

// xmin is the 32-bit transaction id; pg_current_xact_id() carries an epoch above it.
const XID = `(pg_current_xact_id()::text::bigint % 4294967296)`

/** Before a lifecycle: a transaction id every later write is newer than, and every table's keys. */
export async function postgresMarks(pool: pg.Pool, skip: ReadonlySet<string>): Promise<PostgresMarks> {
  const pks = await primaryKeys(pool)
  const keys: PostgresMarks['keys'] = new Map()
  for (const table of await plainTables(pool, skip)) {
    const columns = pks.get(table)
    if (!columns) throw new Error(`bench:history: table ${table} has no primary key; its copies could not be told apart`)
    const { rows } = await pool.query(`select ${columns.map((c) => `"${c}"`).join(', ')} from "${table}"`)
    keys.set(table, { columns, before: new Set(rows.map((row) => keyOf(row, columns))) })
  }
  const xid = Number((await pool.query<{ x: string }>(`select ${XID} as x`)).rows[0]!.x)
  return { xid, keys }
}

const keyOf = (row: Record<string, unknown>, columns: string[]) => JSON.stringify(columns.map((c) => row[c]))

/** The rows added since `marks`, per table, in the order they were written. */
export async function postgresRowsSince(pool: pg.Pool, marks: PostgresMarks): Promise<CapturedRows> {
  const rows: CapturedRows = {}
  for (const [table, { columns, before }] of marks.keys) {
    const added = (
      await pool.query(`select * from "${table}" where xmin::text::bigint > $1 order by xmin::text::bigint, ctid`, [marks.xid])
    ).rows.filter((row) => !before.has(keyOf(row, columns)))
    for (const row of added)
      for (const [column, value] of Object.entries(row))
        if (Buffer.isBuffer(value) || value instanceof Date)
          throw new Error(`bench:history: ${table}.${column} is not text or a number; the copier would need to learn it`)
    if (added.length) rows[table] = added
  }
  return rows
}

/** PostgreSQL's: every column but bigserial positions and the event feed's transaction id (defaults it computes). */
export async function postgresCopyColumns(pool: pg.Pool, tables: string[]): Promise<CopyColumns> {
  const { rows } = await pool.query<{ table_name: string; column_name: string; assigned: boolean }>(
    `select table_name, column_name,
            (coalesce(column_default, '') ~ '^(nextval|pg_current_xact_id)\\(' or is_identity = 'YES' or is_generated = 'ALWAYS') as assigned
     from information_schema.columns
     where table_schema = current_schema() and table_name = any($1) order by table_name, ordinal_position`,
    [tables],
  )
  const columns: CopyColumns = new Map(tables.map((t) => [t, []]))
  for (const r of rows) if (!r.assigned) columns.get(r.table_name)!.push(r.column_name)
  return columns
}

// PostgreSQL binds at most 65,535 parameters a statement.
const MAX_PARAMETERS = 60_000

/** Rows gathered per table, written with multi-row inserts on `flush`. */
export class TableRows {
  private readonly rows = new Map<string, unknown[][]>()
  constructor(private readonly columns: CopyColumns) {}

  readonly add = (table: string, values: unknown[]) => {
    let list = this.rows.get(table)
    if (!list) this.rows.set(table, (list = []))
    list.push(values)
  }

  async flush(client: pg.ClientBase): Promise<void> {
    for (const [table, list] of this.rows) {
      const names = this.columns.get(table)!
      const perStatement = Math.max(1, Math.floor(MAX_PARAMETERS / names.length))
      for (let i = 0; i < list.length; i += perStatement) {
        const chunk = list.slice(i, i + perStatement)
        const tuples = chunk.map((_, r) => `(${names.map((_, c) => `$${r * names.length + c + 1}`).join(', ')})`)
        await client.query(`insert into "${table}" (${names.map((n) => `"${n}"`).join(', ')}) values ${tuples.join(', ')}`, chunk.flat())
      }
    }
    this.rows.clear()
  }
}

/** Readings stored, counted on a pool without the sink's statement timeout (a year's count takes longer). */
export async function postgresReadings(t: PostgresTarget): Promise<number> {
  const pool = postgresPool(t, 1)
  try {
    return Number((await pool.query<{ n: string }>('select count(*) as n from readings')).rows[0]!.n)
  } finally {
    await pool.end()
  }
}

/** Bytes the readings take (their partitioned table, indexes and TOAST included) and the rest of the schema's. */
export async function postgresBytes(t: PostgresTarget): Promise<{ readings: number; entities: number }> {
  const pool = postgresPool(t, 1)
  try {
    const { rows } = await pool.query<{ readings: string; total: string }>(
      `select
         (select coalesce(sum(pg_total_relation_size(inhrelid)), 0) from pg_inherits where inhparent = 'readings'::regclass) as readings,
         (select coalesce(sum(pg_total_relation_size(c.oid)), 0) from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = current_schema() and c.relkind in ('r', 'm')) as total`,
    )
    const readings = Number(rows[0]!.readings)
    return { readings, entities: Number(rows[0]!.total) - readings }
  } finally {
    await pool.end()
  }
}
