import { OpenAPIHono } from '@hono/zod-openapi'
import type { Context, MiddlewareHandler } from 'hono'
import type { ClientRegistry, ClientRecord } from '../../auth/clients.js'
import { tokenEndpointAuthMethods } from '../../auth/clients.js'
import { grants } from '../../auth/grants/index.js'
import type { KeyRing } from '../../auth/keys.js'
import { OAuthError } from '../../auth/oauth-error.js'
import type { People } from '../../auth/people.js'
import { REFRESH_TOKEN_PREFIX } from '../../auth/refresh-tokens.js'
import type { Clock } from '../../clock.js'
import { allScopes } from '../../auth/scopes.js'
import type { TokenService } from '../../auth/tokens.js'
import { OAuthErrorBody } from '../common-responses.js'
import type { AppEnv } from '../env.js'
import { json, publicRoute, z } from '../openapi.js'

/** RFC 6749 §5.2 error response (the OAuth endpoints answer in OAuth's format, not problem+json). */
const oauthError = (c: Context, status: 400 | 401, error: string, description: string) => {
  if (status === 401) c.header('WWW-Authenticate', 'Basic realm="rxtrace"')
  return c.json({ error, error_description: description }, status)
}

const form = <T extends z.ZodType>(schema: T) => ({
  body: { content: { 'application/x-www-form-urlencoded': { schema } }, required: true },
})
const clientAuthFields = {
  client_id: z
    .string()
    .optional()
    .describe('client_secret_post only (or, with client_secret_basic, the same id as the Authorization header)'),
  client_secret: z.string().optional().describe('client_secret_post only; never together with an Authorization header (RFC 6749 §2.3)'),
}
const badForm = (result: { success: boolean }, c: Context) =>
  result.success ? undefined : oauthError(c, 400, 'invalid_request', 'The form parameters are invalid.')

type ClientAuthFields = { client_id?: string | undefined; client_secret?: string | undefined }
type Presented = { method: 'client_secret_basic' | 'client_secret_post'; clientId: string; secret: string }

/**
 * RFC 6749 §2.3: the one way this request presents client credentials. "The client MUST NOT use
 * more than one authentication method in each request": an Authorization header together with a
 * client_secret in the body is refused, as is a client_id in the body naming another client.
 */
function presentedCredentials(c: Context, body: ClientAuthFields): Presented | 'none' | 'several' {
  const header = c.req.header('authorization')
  if (header !== undefined) {
    if (body.client_secret !== undefined) return 'several'
    if (!header.startsWith('Basic ')) return 'none'
    // RFC 6749 §2.3.1: HTTP Basic over the form-urlencoded id and secret.
    const decoded = Buffer.from(header.slice(6), 'base64').toString()
    const colon = decoded.indexOf(':')
    if (colon < 0) return 'none'
    const clientId = formDecoded(decoded.slice(0, colon))
    if (body.client_id !== undefined && body.client_id !== clientId) return 'several'
    return { method: 'client_secret_basic', clientId, secret: formDecoded(decoded.slice(colon + 1)) }
  }
  if (body.client_id && body.client_secret) return { method: 'client_secret_post', clientId: body.client_id, secret: body.client_secret }
  return 'none'
}

/**
 * authenticate client: the presented secret must match, by the method the client registered
 * (`token_endpoint_auth_method`) and no other. Answers the client, or the OAuth error to send.
 */
async function authenticateClient(c: Context, clients: ClientRegistry, body: ClientAuthFields): Promise<ClientRecord | Response> {
  const presented = presentedCredentials(c, body)
  if (presented === 'several')
    return oauthError(c, 400, 'invalid_request', 'Authenticate the client one way only: HTTP Basic or client_secret in the form, not both.')
  if (presented === 'none') return oauthError(c, 401, 'invalid_client', 'Client authentication failed.')
  const client = await clients.authenticate(presented.clientId, presented.secret)
  if (!client) return oauthError(c, 401, 'invalid_client', 'Client authentication failed.')
  // Told only once the secret was right, so it says nothing about clients the caller cannot use.
  if (client.token_endpoint_auth_method !== presented.method) {
    return oauthError(c, 401, 'invalid_client', `This client authenticates with ${client.token_endpoint_auth_method} only.`)
  }
  return client
}

/** RFC 6749 §2.1 / RFC 7591 `none`: a public client names itself and proves nothing; PKCE binds its code instead. */
async function identifyPublicClient(
  clients: ClientRegistry,
  body: { client_id?: string | undefined; client_secret?: string | undefined },
  authorization: string | undefined,
): Promise<ClientRecord | null> {
  if (!body.client_id || body.client_secret || authorization) return null
  const client = await clients.find(body.client_id, { usable: true })
  return client?.token_endpoint_auth_method === 'none' ? client : null
}

// Many clients (curl -u among them) send the id and secret without the form-encoding of
// RFC 6749 §2.3.1; a value that is not valid percent-encoding is taken as sent.
function formDecoded(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** RFC 6749 §3.2, RFC 7009 §2.1, RFC 7662 §2.1: parameters come form-encoded; anything else is invalid_request. */
const requireForm: MiddlewareHandler = async function requireForm(c, next) {
  const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase()
  if (c.req.method === 'POST' && type !== 'application/x-www-form-urlencoded') {
    return oauthError(c, 400, 'invalid_request', 'Send the parameters as application/x-www-form-urlencoded.')
  }
  await next()
}

export function oauthRoutes({
  clients,
  tokens,
  keys,
  people,
  clock,
}: {
  clients: ClientRegistry
  tokens: TokenService
  keys: KeyRing
  people: People
  clock: Clock
}) {
  const app = new OpenAPIHono<AppEnv>()
  const issuer = tokens.issuer
  app.use('/oauth/*', requireForm)

  app.openapi(
    publicRoute({
      method: 'get',
      path: '/.well-known/oauth-authorization-server',
      operationId: 'getAuthorizationServerMetadata',
      tags: ['OAuth'],
      summary: 'RFC 8414 authorization server metadata',
      responses: { 200: json(z.record(z.string(), z.unknown()), 'Metadata') },
    }),
    (c) =>
      c.json(
        {
          issuer,
          token_endpoint: `${issuer}/oauth/token`,
          jwks_uri: `${issuer}/.well-known/jwks.json`,
          authorization_endpoint: `${issuer}/oauth/authorize`,
          revocation_endpoint: `${issuer}/oauth/revoke`,
          introspection_endpoint: `${issuer}/oauth/introspect`,
          registration_endpoint: `${issuer}/v1/oauth/clients`,
          // Ends the browser session of the sign-in pages (the name OpenID Connect RP-Initiated Logout uses).
          end_session_endpoint: `${issuer}/oauth/logout`,
          grant_types_supported: [...grants.keys()],
          token_endpoint_auth_methods_supported: tokenEndpointAuthMethods,
          code_challenge_methods_supported: ['S256'], // RFC 7636: `plain` is refused
          authorization_response_iss_parameter_supported: true, // RFC 9207
          response_modes_supported: ['query'],
          revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
          introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          scopes_supported: allScopes,
          response_types_supported: ['code'],
          access_token_signing_alg_values_supported: ['ES256'],
          service_documentation: `${issuer}/docs`,
        },
        200,
      ),
  )

  app.openapi(
    publicRoute({
      method: 'get',
      path: '/.well-known/jwks.json',
      operationId: 'getJwks',
      tags: ['OAuth'],
      summary: 'RFC 7517 public signing keys',
      responses: { 200: json(z.object({ keys: z.array(z.record(z.string(), z.unknown())) }), 'JWKS') },
    }),
    async (c) => {
      c.header('Cache-Control', 'public, max-age=300')
      return c.json(await keys.jwks(), 200)
    },
  )

  app.openapi(
    publicRoute({
      method: 'post',
      path: '/oauth/token',
      operationId: 'requestToken',
      tags: ['OAuth'],
      summary: 'Get tokens: client_credentials, authorization_code (PKCE S256) or refresh_token',
      description:
        'Confidential clients authenticate with client_secret_basic or client_secret_post; a public client (token_endpoint_auth_method none) sends only client_id and may use authorization_code and refresh_token. Refresh tokens rotate on every use.',
      request: form(
        z.object({
          grant_type: z.string(),
          scope: z.string().optional(),
          code: z.string().optional().describe('authorization_code'),
          redirect_uri: z.string().optional().describe('authorization_code: the one the code was issued for'),
          code_verifier: z.string().optional().describe('authorization_code: the PKCE verifier (RFC 7636)'),
          refresh_token: z.string().optional().describe('refresh_token'),
          ...clientAuthFields,
        }),
      ),
      responses: {
        200: json(
          z.object({
            access_token: z.string(),
            token_type: z.literal('Bearer'),
            expires_in: z.number(),
            scope: z.string(),
            refresh_token: z.string().optional().describe('User grants, when the client may refresh'),
          }),
          'RFC 6749 §5.1 token',
        ),
        400: json(OAuthErrorBody, 'RFC 6749 §5.2 error'),
        401: json(OAuthErrorBody, 'Client authentication failed'),
      },
    }),
    async (c) => {
      const body = c.req.valid('form')
      // A public client names itself and proves nothing (PKCE binds its code); any other authenticates one way only.
      const publicClient = await identifyPublicClient(clients, body, c.req.header('authorization'))
      const client = publicClient ?? (await authenticateClient(c, clients, body))
      if (client instanceof Response) return client
      const grant = grants.get(body.grant_type)
      if (!grant) return oauthError(c, 400, 'unsupported_grant_type', `Supported grant types: ${[...grants.keys()].join(', ')}.`)
      try {
        return c.json(await grant.handler({ client, params: body, requestId: c.get('requestId'), tokens, people, clock }), 200)
      } catch (error) {
        if (error instanceof OAuthError) return oauthError(c, error.status, error.error, error.message)
        throw error
      }
    },
    badForm,
  )

  app.openapi(
    publicRoute({
      method: 'post',
      path: '/oauth/revoke',
      operationId: 'revokeToken',
      tags: ['OAuth'],
      summary: 'RFC 7009 token revocation',
      description:
        'A client revokes its own access or refresh tokens; a public client sends only its client_id. A refresh token takes its whole family with it: every refresh token of the sign-in and the access tokens they issued.',
      request: form(z.object({ token: z.string(), token_type_hint: z.string().optional(), ...clientAuthFields })),
      responses: {
        200: { description: 'Revoked, or was not a valid token (RFC 7009 §2.2)' },
        401: json(OAuthErrorBody, 'Client authentication failed'),
      },
    }),
    async (c) => {
      const body = c.req.valid('form')
      // RFC 7009 §2.1: a public client names itself, as at the token endpoint; holding the token is its proof.
      const publicClient = await identifyPublicClient(clients, body, c.req.header('authorization'))
      const client = publicClient ?? (await authenticateClient(c, clients, body))
      if (client instanceof Response) return client
      // RFC 7009 §2.1: a client revokes only its own tokens; anything else is answered 200 silently.
      // The hint is only a hint: a refresh token is told by its `rt_` prefix, anything else is tried as an access token.
      if (body.token.startsWith(REFRESH_TOKEN_PREFIX)) await people.refreshTokens.revokePresented(body.token, client.client_id)
      else {
        const principal = await tokens.inspect(body.token)
        if (principal && principal.clientId === client.client_id) await tokens.revoke(principal)
      }
      return c.body(null, 200)
    },
    badForm,
  )

  app.openapi(
    publicRoute({
      method: 'post',
      path: '/oauth/introspect',
      operationId: 'introspectToken',
      tags: ['OAuth'],
      summary: 'RFC 7662 token introspection',
      request: form(z.object({ token: z.string(), token_type_hint: z.string().optional(), ...clientAuthFields })),
      responses: {
        200: json(z.record(z.string(), z.unknown()), '`active` and, when active, the claims'),
        401: json(OAuthErrorBody, 'Client authentication failed'),
      },
    }),
    async (c) => {
      const body = c.req.valid('form')
      const client = await authenticateClient(c, clients, body)
      if (client instanceof Response) return client
      const principal = await tokens.inspect(body.token)
      const unrestricted = !client.pharmacy_id && !client.fleet_id && client.scope.split(' ').includes('clients:write')
      // A client may introspect its own tokens; an unrestricted administrator, anyone's.
      if (!principal || (principal.clientId !== client.client_id && !unrestricted)) return c.json({ active: false }, 200)
      return c.json(
        {
          active: true,
          scope: [...principal.scopes].join(' '),
          client_id: principal.clientId,
          sub: principal.sub,
          token_type: 'Bearer',
          exp: principal.exp,
          iss: issuer,
          aud: tokens.audience,
          jti: principal.jti,
          ...(principal.pharmacyId ? { pharmacy_id: principal.pharmacyId } : {}),
          ...(principal.fleetId ? { fleet_id: principal.fleetId } : {}),
        },
        200,
      )
    },
    badForm,
  )
  return app
}
