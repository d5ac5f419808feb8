import {
  PostgresDialect,
  sql,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type Kysely,
  type SchemaMetadata,
  type TableMetadata,
} from 'kysely'

/**
 * Kysely's migrator asks the dialect's introspector whether its bookkeeping schema and tables
 * exist. The stock PostgreSQL introspector reads every schema of the database and checks each
 * one's privileges by name, so it fails with `schema "…" does not exist` when another schema is
 * dropped meanwhile (another application's, another test run's). This one looks only at the
 * schema the connection works in, which is the only one the migrator needs to know about.
 */
export class OwnSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new OwnSchemaIntrospector(db)
  }
}

class OwnSchemaIntrospector implements DatabaseIntrospector {
  constructor(private readonly db: Kysely<any>) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<{
      name: string
    }>`select nspname as name from pg_catalog.pg_namespace where nspname = current_schema()`.execute(this.db)
    return rows
  }

  /** Tables and views with their names only: the migrator never reads their columns. */
  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; schema: string; kind: string }>`
      select c.relname as name, ns.nspname as schema, c.relkind as kind
      from pg_catalog.pg_class c join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
      where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p')`.execute(this.db)
    return rows.map((row) => ({ name: row.name, schema: row.schema, isView: row.kind === 'v', columns: [] }))
  }

  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() }
  }
}
