import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Interoperability (docs/interop.md): each endpoint's `signature_scheme` (`v1` HMAC, the default,
 * or `v1a` Ed25519) and `body_format` (`rxtrace` envelopes, or `fhir-r4` Bundles for a pharmacy's
 * writeback); and the service's own Ed25519 webhook keys, published at
 * /.well-known/webhook-keys.json, their private halves sealed like the token signing keys.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('webhook_endpoints')
    .addColumn('signature_scheme', 'text', (c) => c.notNull().defaultTo('v1'))
    .execute()
  await db.schema
    .alterTable('webhook_endpoints')
    .addColumn('body_format', 'text', (c) => c.notNull().defaultTo('rxtrace'))
    .execute()
  await db.schema
    .createTable('webhook_signing_keys')
    .addColumn('kid', 'text', (c) => c.primaryKey())
    .addColumn('private_jwk', 'text', (c) => c.notNull())
    .addColumn('public_jwk', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('activates_at', 'text', (c) => c.notNull())
    .addColumn('retires_at', 'text')
    .execute()
}
