import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * PostgreSQL only: what N copies of the service on one database share beyond the entities.
 *
 * - `readings`: the time series when `DATABASE_URL` is set without `QUESTDB_CONFIG`
 *   (timeseries/postgres-sink.ts), so every copy reads every copy's readings. The primary key
 *   (tote_id, ts) is the dedup key (a retransmission is stored once) and serves a tote's
 *   readings; the partial index serves a delivery's trace. Times are epoch ms (bigint), as the
 *   other sinks store them.
 * - `rule_leases`: which copy evaluates a delivery's readings right now
 *   (telemetry/evaluation-leases.ts). A lease runs out at `expires_at` (epoch ms, the database's
 *   clock) unless its holder renews it, so a copy that dies hands its deliveries over.
 *
 * SQLite is one process on one file: its readings keep their own file, and it needs no lease.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return
  // One round trip: no parameters, so PostgreSQL takes the statements as one simple query.
  await sql
    .raw(
      `
    create table readings (
      tote_id text not null,
      ts bigint not null,
      delivery_id text,
      rx_id text,
      temp_c double precision not null,
      battery double precision,
      humidity double precision,
      lat double precision,
      lng double precision,
      seq bigint,
      received_at bigint not null,
      late boolean not null,
      primary key (tote_id, ts)
    );
    create index readings_by_delivery on readings (delivery_id, ts) where delivery_id is not null;
    create table rule_leases (
      delivery_id text primary key,
      holder text not null,
      expires_at bigint not null
    );
    create index rule_leases_by_holder on rule_leases (holder);
  `,
    )
    .execute(db)
}
