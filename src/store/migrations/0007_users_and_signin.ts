import type { Kysely } from 'kysely'

/**
 * People sign in: users with a role fixed to one tenant, their one-time password-setup links,
 * browser sessions, authorization codes and refresh-token families. Every secret among them
 * (setup token, session id, code, refresh token) is stored as its SHA-256 only: each is 256 random
 * bits, so a fast hash is a sound verifier and a stolen table gives nothing to replay.
 * Clients gain `first_party` (no consent page; set by an administrator only).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('oauth_clients')
    .addColumn('first_party', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()

  await db.schema
    .createTable('users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique()) // stored lower-cased
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('pharmacy_id', 'text')
    .addColumn('fleet_id', 'text')
    .addColumn('driver_id', 'text')
    .addColumn('password_hash', 'text')
    .addColumn('disabled', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('users_pharmacy').on('users').columns(['pharmacy_id', 'id']).execute()
  await db.schema.createIndex('users_fleet').on('users').columns(['fleet_id', 'id']).execute()

  await db.schema
    .createTable('user_setup_tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .execute()

  await db.schema
    .createTable('user_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_seen_at', 'text', (c) => c.notNull())
    .addColumn('ended_at', 'text')
    .execute()
  await db.schema.createIndex('user_sessions_user').on('user_sessions').column('user_id').execute()

  await db.schema
    .createTable('authorization_codes')
    .addColumn('code_hash', 'text', (c) => c.primaryKey())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('session_hash', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    // What its first use issued, so a second use can revoke it (RFC 6749 §4.1.2).
    .addColumn('family_id', 'text')
    .addColumn('access_jti', 'text')
    .addColumn('access_expires_at', 'text')
    .execute()

  await db.schema
    .createTable('refresh_tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('family_id', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('session_hash', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('family_created_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull()) // idle limit of this one token
    .addColumn('access_jti', 'text', (c) => c.notNull()) // the access token issued with it
    .addColumn('access_expires_at', 'text', (c) => c.notNull())
    .addColumn('rotated_at', 'text')
    .addColumn('revoked_at', 'text')
    .execute()
  await db.schema.createIndex('refresh_tokens_family').on('refresh_tokens').column('family_id').execute()
  await db.schema.createIndex('refresh_tokens_user').on('refresh_tokens').column('user_id').execute()
  await db.schema.createIndex('refresh_tokens_session').on('refresh_tokens').column('session_hash').execute()
}
