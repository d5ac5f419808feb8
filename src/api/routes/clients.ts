import { OpenAPIHono } from '@hono/zod-openapi'
import { assertNotMorePowerful, assertScopesFitTenant, defaultScopes, powerGap } from '../../auth/authority.js'
import { authorityOf, clientGrantTypes, tokenEndpointAuthMethods, type ClientRecord, type ClientRegistry } from '../../auth/clients.js'
import type { KeyRing } from '../../auth/keys.js'
import { allScopes, type Principal } from '../../auth/scopes.js'
import { AppError, notFound, validationFailed } from '../../errors.js'
import { countOwned, createWithinLimit } from '../../services/tenant-limits.js'
import type { Dialect } from '../../store/database.js'
import type { Db } from '../../store/schema.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, v1Route, z } from '../openapi.js'

// RFC 7591 §2 client metadata names.
const NewClient = z
  .strictObject({
    client_name: z.string().min(1).max(200),
    grant_types: z
      .array(z.enum(clientGrantTypes))
      .min(1)
      .optional()
      .describe(
        'Default: client_credentials, or authorization_code and refresh_token for a public client. A public client never gets client_credentials.',
      ),
    redirect_uris: z
      .array(z.url())
      .max(10)
      .optional()
      .describe('Exact redirect URIs for authorization_code: https, or http on a loopback address (RFC 8252 §7.3); no fragment'),
    scope: z
      .string()
      .refine(
        (s) =>
          s
            .split(' ')
            .filter(Boolean)
            .every((x) => (allScopes as readonly string[]).includes(x)),
        'contains an unknown scope',
      )
      .optional()
      .describe(
        "Space-separated; Default: the read-only scopes of the client's tenant kind that the creator holds. A fleet-restricted client never holds cold-chain:disposition.",
      ),
    token_endpoint_auth_method: z
      .enum(tokenEndpointAuthMethods)
      .optional()
      .describe(
        'RFC 6749 §2.3: the only way /oauth/token accepts its secret (default client_secret_basic); `none` registers a public client (a browser or mobile app): no secret, PKCE only',
      ),
    first_party: z
      .boolean()
      .optional()
      .describe('Operator-trusted: its users see no consent page. Only an unrestricted administrator may set it.'),
    pharmacy_id: z.string().optional().describe('Restrict the client to one pharmacy'),
    fleet_id: z.string().optional().describe('Restrict the client to one fleet'),
  })
  .openapi('NewClient')

const Client = z
  .object({
    client_id: z.string(),
    client_name: z.string(),
    grant_types: z.array(z.string()),
    redirect_uris: z.array(z.string()),
    scope: z.string(),
    token_endpoint_auth_method: z.string(),
    pharmacy_id: z.string().nullable(),
    fleet_id: z.string().nullable(),
    first_party: z.boolean(),
    created_at: z.string(),
  })
  .openapi('Client')

/** RFC 6749 §3.1.2, RFC 9700 §2.1 and §4.1: grants that fit the client type, and redirect URIs compared exactly. */
function checkSignInFields(principal: Principal, input: z.infer<typeof NewClient>): z.infer<typeof NewClient> {
  const method = input.token_endpoint_auth_method ?? 'client_secret_basic'
  const grants = input.grant_types ?? (method === 'none' ? ['authorization_code', 'refresh_token'] : ['client_credentials'])
  const errors: { pointer: string; message: string }[] = []
  if (method === 'none' && grants.includes('client_credentials'))
    errors.push({ pointer: '/grant_types', message: 'a public client (token_endpoint_auth_method none) cannot use client_credentials' })
  if (grants.includes('refresh_token') && !grants.includes('authorization_code'))
    errors.push({ pointer: '/grant_types', message: 'refresh_token comes with authorization_code' })
  const uris = input.redirect_uris ?? []
  if (grants.includes('authorization_code') && uris.length === 0)
    errors.push({ pointer: '/redirect_uris', message: 'authorization_code needs at least one redirect URI' })
  uris.forEach((uri, i) => {
    const url = new URL(uri)
    const loopback = url.protocol === 'http:' && ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname)
    if (url.protocol !== 'https:' && !loopback)
      errors.push({ pointer: `/redirect_uris/${i}`, message: 'must be https (or http on a loopback address)' })
    if (url.hash || uri.includes('#')) errors.push({ pointer: `/redirect_uris/${i}`, message: 'must not contain a fragment' })
  })
  const administrator = !principal.pharmacyId && !principal.fleetId && allScopes.every((s) => principal.scopes.has(s))
  if (input.first_party && !administrator)
    errors.push({ pointer: '/first_party', message: 'only an unrestricted administrator marks a client first-party' })
  if (errors.length) throw validationFailed(errors)
  return { ...input, token_endpoint_auth_method: method, grant_types: grants }
}

/**
 * A token registers only clients no more powerful than itself: within its own tenant, holding no
 * scope it lacks. With no `scope`, the client gets the read-only scopes of its tenant kind that
 * the creator holds (RFC 7591 §2 leaves the default to the server).
 */
function registrationScope(principal: Principal, input: z.infer<typeof NewClient>): string {
  if (input.pharmacy_id && input.fleet_id)
    throw validationFailed([{ pointer: '/fleet_id', message: 'restrict a client to a pharmacy or a fleet, not both' }])
  if (principal.pharmacyId && input.pharmacy_id !== principal.pharmacyId)
    throw validationFailed([{ pointer: '/pharmacy_id', message: `must be ${principal.pharmacyId}` }])
  if (principal.fleetId && input.fleet_id !== principal.fleetId)
    throw validationFailed([{ pointer: '/fleet_id', message: `must be ${principal.fleetId}` }])
  const tenant = { pharmacyId: input.pharmacy_id ?? null, fleetId: input.fleet_id ?? null }
  const scope =
    input.scope ??
    defaultScopes(tenant)
      .filter((s) => principal.scopes.has(s))
      .join(' ')
  if (!scope.trim()) throw validationFailed([{ pointer: '/scope', message: 'name the scopes this client needs' }])
  const gap = powerGap(principal, { scopes: scope, ...tenant })
  if (gap.scopes.length)
    throw validationFailed([{ pointer: '/scope', message: `you cannot grant scopes you do not hold: ${gap.scopes.join(' ')}` }])
  assertScopesFitTenant({ scopes: scope, ...tenant })
  return scope
}

/** The client `id` names, if this token may act on it: 404 across tenants, 403 when it is more powerful. */
async function clientInReach(clients: ClientRegistry, principal: Principal, id: string): Promise<ClientRecord> {
  const client = await clients.find(id)
  if (!client) throw notFound('client')
  assertNotMorePowerful(principal, authorityOf(client))
  return client
}

export type ClientRouteDeps = {
  db: Db
  dialect: Dialect
  clients: ClientRegistry
  keys: KeyRing
  /** Clients one pharmacy or fleet may have (docs/api.md, Per-tenant limits); unrestricted clients are the operator's and not counted. */
  maxPerTenant: number
}

export function clientRoutes({ db, dialect, clients, keys, maxPerTenant }: ClientRouteDeps) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('clients:write', {
      method: 'post',
      path: '/v1/oauth/clients',
      operationId: 'createClient',
      tags: ['OAuth'],
      summary: 'Register an OAuth client (RFC 7591 fields)',
      request: jsonBody(NewClient),
      responses: {
        201: json(
          Client.extend({
            client_secret: z
              .string()
              .nullable()
              .optional()
              .describe(
                'Shown once; a public client (none) has none; null in an Idempotency-Key replay, which names it in Idempotent-Replay-Redacted',
              ),
          }),
          'The client and its secret',
        ),
      },
    }),
    async (c) => {
      const principal = c.get('principal')
      const input = c.req.valid('json')
      const scope = registrationScope(principal, input)
      if (input.pharmacy_id && !(await db.selectFrom('pharmacies').select('id').where('id', '=', input.pharmacy_id).executeTakeFirst())) {
        throw validationFailed([{ pointer: '/pharmacy_id', message: `no pharmacy ${input.pharmacy_id}` }])
      }
      if (input.fleet_id && !(await db.selectFrom('fleets').select('id').where('id', '=', input.fleet_id).executeTakeFirst())) {
        throw validationFailed([{ pointer: '/fleet_id', message: `no fleet ${input.fleet_id}` }])
      }
      const newClient = { ...checkSignInFields(principal, input), scope }
      const owner = { pharmacy_id: input.pharmacy_id ?? null, fleet_id: input.fleet_id ?? null }
      const record = answerInTransaction(c, 201, ['/client_secret'])
      const created =
        owner.pharmacy_id || owner.fleet_id
          ? await createWithinLimit(
              { db, dialect },
              { what: 'clients', max: maxPerTenant, owner },
              (trx) => countOwned(trx, 'oauth_clients', owner),
              (trx) => clients.create(newClient, undefined, record, trx),
            )
          : await clients.create(newClient, undefined, record)
      return c.json(created, 201)
    },
  )

  app.openapi(
    v1Route('clients:write', {
      method: 'get',
      path: '/v1/oauth/clients/{id}',
      operationId: 'getClient',
      tags: ['OAuth'],
      summary: 'Read a client (never its secret)',
      request: { params: idParam('cl') },
      responses: { 200: json(Client, 'The client') },
    }),
    async (c) => {
      return c.json(await clientInReach(clients, c.get('principal'), c.req.valid('param').id), 200)
    },
  )

  app.openapi(
    v1Route('clients:write', {
      method: 'post',
      path: '/v1/oauth/clients/{id}/rotate-secret',
      operationId: 'rotateClientSecret',
      tags: ['OAuth'],
      summary: 'New client secret; the old one works for the overlap window',
      request: {
        params: idParam('cl'),
        body: {
          content: {
            'application/json': {
              schema: z.strictObject({
                overlap_s: z
                  .number()
                  .int()
                  .min(0)
                  .max(30 * 86_400)
                  .default(86_400)
                  .describe('How long the old secret keeps working (default 24 h)'),
              }),
            },
          },
          required: false,
        },
      },
      responses: {
        200: json(
          z.object({
            client_id: z.string(),
            client_secret: z
              .string()
              .nullable()
              .describe('Shown once; null in an Idempotency-Key replay, which names it in Idempotent-Replay-Redacted'),
            previous_secret_expires_at: z.string(),
          }),
          'The new secret, shown once',
        ),
      },
    }),
    async (c) => {
      const id = c.req.valid('param').id
      await clientInReach(clients, c.get('principal'), id)
      const body = (c.req.valid('json') ?? {}) as { overlap_s?: number }
      const rotated = await clients.rotateSecret(id, body.overlap_s ?? 86_400, answerInTransaction(c, 200, ['/client_secret']))
      return c.json(rotated!, 200)
    },
  )

  app.openapi(
    v1Route('clients:write', {
      method: 'post',
      path: '/v1/oauth/signing-keys/rotate',
      operationId: 'rotateSigningKey',
      tags: ['OAuth'],
      summary: 'Rotate the token signing key',
      description:
        'The new key is published in the JWKS at once and signs after `publish_ahead_s`; the old key stays published until its tokens expire.',
      request: {
        body: {
          content: { 'application/json': { schema: z.strictObject({ publish_ahead_s: z.number().int().min(0).max(86_400).default(0) }) } },
          required: false,
        },
      },
      responses: { 200: json(z.object({ kid: z.string(), activates_at: z.string(), previous_retires_at: z.string() }), 'The new key id') },
    }),
    async (c) => {
      const principal = c.get('principal')
      if (principal.pharmacyId || principal.fleetId)
        throw new AppError('insufficient_scope', 'Only an unrestricted client rotates signing keys.')
      const body = (c.req.valid('json') ?? {}) as { publish_ahead_s?: number }
      return c.json(await keys.rotate(body.publish_ahead_s ?? 0, answerInTransaction(c, 200)), 200)
    },
  )
  return app
}
