import { sql, type Kysely } from 'kysely'

/**
 * A binding change not yet applied to the stored readings (telemetry/binding-follow.ts): the
 * delivery's version that made it, written by the dispatch or end in its own commit and cleared
 * once its readings have followed. A crash, or a readings store that failed every retry, between
 * the two leaves it set, and the follow is made again (at start, and before every expiry pass) —
 * else a backdated dispatch's readings would stay an idle tote's, and go after a week, and a
 * backdated end's would stay the delivery's for years. Few rows are ever set: a partial index.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('deliveries').addColumn('follow_pending', 'integer').execute()
  await sql`create index deliveries_follow_pending on deliveries (follow_pending) where follow_pending is not null`.execute(db)
}
