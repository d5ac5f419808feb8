import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

// Months made for existing readings reach back at most this far (10 years: past the 6-year records
// window); older ones, and ones more than MONTHS_AHEAD ahead (a sensor's clock far off), go to the
// default partition, still read and expired like the others.
const MONTHS_BACK = 120
const MONTHS_AHEAD = 3

/**
 * Retention (docs/operations.md, Retention).
 *
 * - Both engines: the deliveries the reading expirer keeps (still open, or bound from before the
 *   records cutoff) are found through an index on `bound_from` instead of a scan of every delivery.
 * - PostgreSQL: `readings` becomes a table partitioned by RANGE of `ts`, one partition per UTC month
 *   (timeseries/postgres-partitions.ts), so a delivery's trace reads only the months of its
 *   interval and expiry drops whole months. The existing rows are copied over in this migration
 *   (one pass over the table, at the upgrade). Readings bound to no delivery get a partial index
 *   on `ts`: the expirer finds them without reading the bound ones, which stay for years.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  await db.schema
    .createIndex('deliveries_bound_from')
    .on('deliveries')
    .column('bound_from')
    .where(sql.ref('tote_id'), 'is not', null)
    .execute()
  if (dialect !== 'postgres') return

  await sql
    .raw(
      `
    alter table readings rename to readings_unpartitioned;
    alter index readings_pkey rename to readings_unpartitioned_pkey;
    alter index readings_by_delivery rename to readings_unpartitioned_by_delivery;
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
    ) partition by range (ts);
    create table readings_default partition of readings default;
  `,
    )
    .execute(db)
  const { rows } = await sql<{
    lo: string | null
    hi: string | null
  }>`select min(ts) as lo, max(ts) as hi from readings_unpartitioned`.execute(db)
  const now = Date.now()
  const earliest = monthOf(now - MONTHS_BACK * 31 * 86_400_000).fromMs
  const latest = monthOf(now).fromMs
  const from = Math.max(Number(rows[0]?.lo ?? now), earliest)
  let until = latest
  for (let i = 0; i <= MONTHS_AHEAD; i++) until = monthOf(until).toMs
  for (let month = monthOf(Math.min(from, now)); month.fromMs < until; month = monthOf(month.toMs))
    await sql.raw(`create table ${month.name} partition of readings for values from (${month.fromMs}) to (${month.toMs})`).execute(db)
  await sql
    .raw(
      `
    insert into readings select * from readings_unpartitioned;
    drop table readings_unpartitioned;
    create index readings_by_delivery on readings (delivery_id, ts) where delivery_id is not null;
    create index readings_unbound on readings (ts) where delivery_id is null;
  `,
    )
    .execute(db)
}

/**
 * The UTC month holding `ms`, named as the sink names its partitions
 * (timeseries/postgres-partitions.ts). Kept here, not imported: a migration stays as it shipped.
 */
function monthOf(ms: number): { name: string; fromMs: number; toMs: number } {
  const d = new Date(ms)
  const y = d.getUTCFullYear()
  const m = d.getUTCMonth()
  return { name: `readings_p${y}${String(m + 1).padStart(2, '0')}`, fromMs: Date.UTC(y, m, 1), toMs: Date.UTC(y, m + 1, 1) }
}
