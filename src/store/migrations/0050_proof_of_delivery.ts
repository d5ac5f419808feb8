import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Proof of delivery (docs/api.md, Proof of delivery):
 * - `pod_requirements` (JSON) on pharmacies and prescriptions, and on the delivery the ones in force,
 *   fixed by its dispatch;
 * - attachments: photos and signature images, stored content-addressed in the database (so every
 *   copy of the service on one PostgreSQL reads what another stored) as `attachment_blobs` (one row
 *   per sha256) cut into `attachment_chunks` (so no single statement carries a whole 5 MiB image),
 *   and `attachments`, each naming a blob for one delivery;
 * - `delivery_pins`: the PIN issued at dispatch, sealed under SECRETS_KEY, and its wrong tries;
 * - `custody_events.evidence`: what a proof of delivery adds to its custody event (inside its hash).
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  for (const table of ['pharmacies', 'prescriptions', 'deliveries'])
    await db.schema.alterTable(table).addColumn('pod_requirements', 'text').execute()
  await db.schema.alterTable('custody_events').addColumn('evidence', 'text').execute()
  await db.schema
    .createTable('attachment_blobs')
    .addColumn('sha256', 'text', (c) => c.primaryKey())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('chunks', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema
    .createTable('attachment_chunks')
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('bytes', dialect === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
    .addPrimaryKeyConstraint('attachment_chunks_pk', ['sha256', 'seq'])
    .execute()
  await db.schema
    .createTable('attachments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('attachments_delivery_sha256').on('attachments').columns(['delivery_id', 'sha256']).unique().execute()
  await db.schema
    .createTable('delivery_pins')
    .addColumn('delivery_id', 'text', (c) => c.primaryKey())
    .addColumn('pin', 'text', (c) => c.notNull())
    .addColumn('wrong_tries', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('locked_at', 'text')
    .addColumn('issued_at', 'text', (c) => c.notNull())
    .execute()
}
