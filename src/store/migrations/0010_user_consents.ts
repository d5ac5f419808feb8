import type { Kysely } from 'kysely'

/**
 * Consent a person gave a third-party app, one row per (user, client, scope), so the consent
 * page is shown only when an app asks for a scope the person has not allowed it yet. Rows are
 * deleted, not marked, when consent ends (logout, a replayed token, the user disabled, "Deny").
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('user_consents')
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('granted_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_consents_pk', ['user_id', 'client_id', 'scope'])
    .execute()
}
