import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { hashSecret, secretMatches } from '../hashing.js'
import { newId } from '../ids.js'
import { precompiled } from '../store/precompiled.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { Db, Executor } from '../store/schema.js'
import { assertScopesFitTenant, defaultScopes, effectiveScopes, type Authority } from './authority.js'
import { allScopes, parseScope } from './scopes.js'

export type ClientRecord = {
  client_id: string
  client_name: string
  grant_types: string[]
  redirect_uris: string[]
  scope: string
  token_endpoint_auth_method: string
  pharmacy_id: string | null
  fleet_id: string | null
  /** Trusted by the operator: its users see no consent page. Only an unrestricted administrator sets it. */
  first_party: boolean
  created_at: string
}

/** RFC 7591 §2: how a client authenticates at the token endpoint; `none` is a public client (no secret). */
export const tokenEndpointAuthMethods = ['client_secret_basic', 'client_secret_post', 'none'] as const
export type TokenEndpointAuthMethod = (typeof tokenEndpointAuthMethods)[number]
export const clientGrantTypes = ['client_credentials', 'authorization_code', 'refresh_token'] as const

export type NewClient = {
  client_name: string
  grant_types?: string[] | undefined
  redirect_uris?: string[] | undefined
  scope?: string | undefined
  token_endpoint_auth_method?: TokenEndpointAuthMethod | undefined
  pharmacy_id?: string | null | undefined
  fleet_id?: string | null | undefined
  first_party?: boolean | undefined
}

/** The admin client holds every scope and no tenant restriction. */
const ADMIN_SCOPE = allScopes.join(' ')

export type RotatedSecret = { client_id: string; client_secret: string; previous_secret_expires_at: string }

const newClientSecret = () => `cs_${randomBytes(32).toString('base64url')}`

/** OAuth clients (RFC 7591 field names); secrets are stored as hashes only and shown once. */
export class ClientRegistry {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /**
   * Registers a client; with no `scope` it gets the read-only scopes of its tenant kind. A public
   * client (`none`) gets no secret: its row holds an empty hash, which no secret matches. A secret
   * is shown once: `record` keeps the answer without it. `db`: a transaction to insert in (the
   * per-tenant limit counts and inserts in one).
   */
  async create(
    input: NewClient & { token_endpoint_auth_method: 'none' },
    fixed?: undefined,
    record?: RecordAnswer<ClientRecord>,
    db?: Executor,
    publicId?: string,
  ): Promise<ClientRecord>
  async create(
    input: NewClient & { token_endpoint_auth_method?: Exclude<TokenEndpointAuthMethod, 'none'> | undefined },
    fixed?: { clientId: string; secret: string },
    record?: RecordAnswer<ClientRecord & { client_secret: string }>,
    db?: Executor,
  ): Promise<ClientRecord & { client_secret: string }>
  async create(
    input: NewClient,
    fixed?: { clientId: string; secret: string },
    record?: RecordAnswer<ClientRecord & { client_secret?: string }>,
    db?: Executor,
  ): Promise<ClientRecord & { client_secret?: string }>
  // Each overload above narrows what `record` is given.
  async create(
    input: NewClient,
    fixed?: { clientId: string; secret: string },
    record?: RecordAnswer<any>,
    db: Executor = this.db,
    publicId?: string,
  ): Promise<ClientRecord & { client_secret?: string }> {
    const tenant = { pharmacyId: input.pharmacy_id ?? null, fleetId: input.fleet_id ?? null }
    const scope = input.scope ?? defaultScopes(tenant).join(' ')
    assertScopesFitTenant({ scopes: scope, ...tenant })
    const clientId = fixed?.clientId ?? publicId ?? newId('cl')
    const isPublic = input.token_endpoint_auth_method === 'none'
    const secret = fixed?.secret ?? newClientSecret()
    const row = {
      client_id: clientId,
      client_name: input.client_name,
      secret_hash: isPublic ? '' : hashSecret(secret),
      previous_secret_hash: null,
      previous_secret_expires_at: null,
      grant_types: JSON.stringify(input.grant_types ?? ['client_credentials']),
      redirect_uris: JSON.stringify(input.redirect_uris ?? []),
      scope,
      token_endpoint_auth_method: input.token_endpoint_auth_method ?? 'client_secret_basic',
      pharmacy_id: input.pharmacy_id ?? null,
      fleet_id: input.fleet_id ?? null,
      first_party: input.first_party ? 1 : 0,
      created_at: iso(this.clock.now()),
    }
    const created = isPublic ? toRecord(row) : { ...toRecord(row), client_secret: secret }
    const insert = async (trx: Executor) => {
      await trx.insertInto('oauth_clients').values(row).execute()
      await record?.(trx, created)
    }
    if (db.isTransaction) await insert(db)
    else await db.transaction().execute(insert)
    return created
  }

  /** The client; with `usable`, only while it is not revoked (a public client has no secret to stop working). */
  async find(clientId: string, { usable = false } = {}): Promise<ClientRecord | undefined> {
    const [row] = await clientById(this.db, clientId)
    return row && (!usable || !revokedAt(row.secret_hash)) ? toRecord(row) : undefined
  }

  /** Checks a presented secret against the current one, or the previous one within its overlap window. */
  async authenticate(clientId: string, secret: string): Promise<ClientRecord | null> {
    const [row] = await clientById(this.db, clientId)
    if (!row) return null
    if (secretMatches(secret, row.secret_hash)) return toRecord(row)
    const previousValid = row.previous_secret_expires_at !== null && Date.parse(row.previous_secret_expires_at) > this.clock.now()
    if (previousValid && secretMatches(secret, row.previous_secret_hash)) return toRecord(row)
    return null
  }

  /** New secret now; the old one keeps working for `overlapS` so deployments can switch without downtime. */
  async rotateSecret(clientId: string, overlapS: number, record?: RecordAnswer<RotatedSecret>): Promise<RotatedSecret | null> {
    const row = await this.db.selectFrom('oauth_clients').select('secret_hash').where('client_id', '=', clientId).executeTakeFirst()
    if (!row) return null
    const secret = newClientSecret()
    const expiresAt = iso(this.clock.now() + overlapS * 1_000)
    const rotated = { client_id: clientId, client_secret: secret, previous_secret_expires_at: expiresAt }
    await this.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('oauth_clients')
        .set({ secret_hash: hashSecret(secret), previous_secret_hash: row.secret_hash, previous_secret_expires_at: expiresAt })
        .where('client_id', '=', clientId)
        .execute()
      await record?.(trx, rotated)
    })
    return rotated
  }

  /** Every client, oldest first, with when it was revoked (null while it is usable); never a secret. */
  async list(): Promise<(ClientRecord & { revoked_at: string | null })[]> {
    const rows = await this.db.selectFrom('oauth_clients').selectAll().orderBy('created_at').orderBy('client_id').execute()
    return rows.map((row) => ({ ...toRecord(row), revoked_at: revokedAt(row.secret_hash) }))
  }

  /**
   * Revokes a client: its secrets stop working at once, so it gets no new tokens. Tokens it
   * already holds stay valid until they expire (TOKEN_TTL_S). The stored hash is replaced by a
   * marker that no secret hashes to, which also records when; null when there is no such client.
   */
  async revoke(clientId: string): Promise<{ revoked_at: string } | null> {
    const row = await this.db.selectFrom('oauth_clients').select('secret_hash').where('client_id', '=', clientId).executeTakeFirst()
    if (!row) return null
    const already = revokedAt(row.secret_hash)
    if (already) return { revoked_at: already }
    const at = iso(this.clock.now())
    await this.db
      .updateTable('oauth_clients')
      .set({ secret_hash: `${REVOKED}${at}`, previous_secret_hash: null, previous_secret_expires_at: null })
      .where('client_id', '=', clientId)
      .execute()
    return { revoked_at: at }
  }

  /** The pharmacy or fleet a client is restricted to, by name, for the sign-in pages; null when unrestricted. */
  async tenantOf(client: ClientRecord): Promise<{ kind: 'pharmacy' | 'fleet'; name: string } | null> {
    if (client.pharmacy_id) {
      const row = await this.db.selectFrom('pharmacies').select('name').where('id', '=', client.pharmacy_id).executeTakeFirst()
      return { kind: 'pharmacy', name: row?.name ?? client.pharmacy_id }
    }
    if (client.fleet_id) {
      const row = await this.db.selectFrom('fleets').select('name').where('id', '=', client.fleet_id).executeTakeFirst()
      return { kind: 'fleet', name: row?.name ?? client.fleet_id }
    }
    return null
  }

  /** README, Configuration: ADMIN_CLIENT_ID/SECRET pin the admin client; otherwise the first start creates one. */
  async ensureAdmin(pinned?: { clientId: string; secret: string }): Promise<{ clientId: string; secret: string } | null> {
    if (pinned) {
      const [existing] = await clientById(this.db, pinned.clientId)
      if (!existing) {
        await this.create({ client_name: 'admin', scope: ADMIN_SCOPE }, pinned)
      } else if (!isPinnedAdmin(existing, pinned.secret)) {
        // Only when it differs: a start writes nothing otherwise, so it also starts on a full disk.
        await this.db
          .updateTable('oauth_clients')
          .set({
            secret_hash: hashSecret(pinned.secret),
            scope: ADMIN_SCOPE,
            pharmacy_id: null,
            fleet_id: null,
            previous_secret_hash: null,
            previous_secret_expires_at: null,
          })
          .where('client_id', '=', pinned.clientId)
          .execute()
      }
      return null
    }
    const any = await this.db.selectFrom('oauth_clients').select('client_id').limit(1).executeTakeFirst()
    if (any) return null
    const created = await this.create({ client_name: 'admin', scope: ADMIN_SCOPE })
    return { clientId: created.client_id, secret: created.client_secret }
  }
}

/** The pharmacist console's client (docs/console.md): first-party, public, the same id everywhere. */
export const CONSOLE_CLIENT_ID = 'cl_console'
/** What the console reads and decides; a person's token is further capped by their role. */
export const CONSOLE_SCOPE = 'pharmacies:read prescriptions:read deliveries:read telemetry:read cold-chain:disposition audit:read'

/**
 * Creates the console's client on first start, or brings an existing one in line with this
 * start's public URLs (an operator who changed ISSUER): a first-party public client (PKCE, no
 * secret) that may use only authorization_code and refresh_token, redirecting to /console/.
 */
export async function ensureConsoleClient(registry: ClientRegistry, db: Db, redirectUris: string[]): Promise<void> {
  const existing = await registry.find(CONSOLE_CLIENT_ID)
  if (!existing) {
    await registry.create(
      {
        client_name: 'rxtrace console',
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        redirect_uris: redirectUris,
        scope: CONSOLE_SCOPE,
        first_party: true,
      },
      undefined,
      undefined,
      undefined,
      CONSOLE_CLIENT_ID,
    )
    return
  }
  if (JSON.stringify(existing.redirect_uris) === JSON.stringify(redirectUris) && existing.scope === CONSOLE_SCOPE) return
  await db
    .updateTable('oauth_clients')
    .set({ redirect_uris: JSON.stringify(redirectUris), scope: CONSOLE_SCOPE })
    .where('client_id', '=', CONSOLE_CLIENT_ID)
    .execute()
}

/** The stored client is already the pinned admin: its secret, the admin scope, no tenant, no previous secret. */
function isPinnedAdmin(
  row: { secret_hash: string; scope: string; pharmacy_id: string | null; fleet_id: string | null; previous_secret_hash: string | null },
  secret: string,
): boolean {
  return (
    row.scope === ADMIN_SCOPE &&
    row.pharmacy_id === null &&
    row.fleet_id === null &&
    row.previous_secret_hash === null &&
    secretMatches(secret, row.secret_hash)
  )
}

// A revoked client's secret_hash: not hex, so secretMatches never accepts any secret for it.
// Every token request reads its client: compiled once (src/store/precompiled.ts).
const clientById = precompiled((db, clientId: string) => db.selectFrom('oauth_clients').selectAll().where('client_id', '=', clientId))

const REVOKED = 'revoked:'

function revokedAt(secretHash: string): string | null {
  return secretHash.startsWith(REVOKED) ? secretHash.slice(REVOKED.length) : null
}

/** What a client may do, in the terms `assertNotMorePowerful` compares. */
export const authorityOf = (client: ClientRecord): Authority => ({
  scopes: client.scope,
  pharmacyId: client.pharmacy_id,
  fleetId: client.fleet_id,
})

/**
 * Scopes a token may carry: the requested ones, which must all belong to the client, or all of
 * them. A scope the client's tenant kind may never hold is left out even if a registration made
 * before that rule still lists it.
 */
export function grantableScopes(client: ClientRecord, requested: string | undefined): string[] | null {
  const allowed = effectiveScopes(authorityOf(client))
  if (!requested) return allowed
  const asked = parseScope(requested)
  return asked.every((s) => allowed.includes(s)) ? asked : null
}

function toRecord(row: {
  client_id: string
  client_name: string
  grant_types: string
  redirect_uris: string
  scope: string
  token_endpoint_auth_method: string
  pharmacy_id: string | null
  fleet_id: string | null
  created_at: string
  first_party: number
}): ClientRecord {
  return {
    client_id: row.client_id,
    client_name: row.client_name,
    grant_types: JSON.parse(row.grant_types),
    redirect_uris: JSON.parse(row.redirect_uris),
    scope: row.scope,
    token_endpoint_auth_method: row.token_endpoint_auth_method,
    pharmacy_id: row.pharmacy_id,
    fleet_id: row.fleet_id,
    first_party: !!row.first_party,
    created_at: row.created_at,
  }
}
