import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * `ingest_sessions`: the persistent MQTT sessions the copies of the service hold on an external
 * broker (src/mqtt/session-adoption.ts), one row per client id with its holder and a lease
 * (`expires_at`, epoch ms, the database's clock). A copy renews the leases of its own sessions;
 * when one runs out, a surviving copy adopts that session: it drains what the broker queued in
 * it, then removes it.
 *
 * Only where copies share the store (PostgreSQL): a SQLite store has one copy, which finds its
 * session again when it restarts.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return
  await sql
    .raw(
      `
    create table ingest_sessions (
      client_id text primary key,
      holder text not null,
      expires_at bigint not null
    );
    create index ingest_sessions_by_expiry on ingest_sessions (expires_at);
  `,
    )
    .execute(db)
}
