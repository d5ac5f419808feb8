import { randomBytes, timingSafeEqual } from 'node:crypto'
import { OpenAPIHono } from '@hono/zod-openapi'
import type { Context } from 'hono'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import type { Clock } from '../../clock.js'
import type { ClientRecord, ClientRegistry } from '../../auth/clients.js'
import { S256_CHALLENGE } from '../../auth/codes.js'
import { userScopes } from '../../auth/grants/user-token.js'
import { consentPage } from '../../auth/pages/consent.js'
import { messagePage } from '../../auth/pages/message.js'
import { signInPage } from '../../auth/pages/sign-in.js'
import type { People } from '../../auth/people.js'
import { isScope, parseScope } from '../../auth/scopes.js'
import type { Session } from '../../auth/sessions.js'
import { clientServes } from '../../auth/tenancy.js'
import type { User } from '../../auth/users.js'
import type { AppEnv } from '../env.js'
import { callerAddress } from '../middleware/caller-address.js'
import { publicRoute, z } from '../openapi.js'

/** The authorization request's parameters (RFC 6749 §4.1.1, RFC 7636 §4.3), carried from page to page. */
const requestParams = [
  'client_id',
  'redirect_uri',
  'response_type',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
  'max_age',
] as const
type AuthorizationRequest = Partial<Record<(typeof requestParams)[number], string>>
type Checked = { client: ClientRecord; redirectUri: string; request: AuthorizationRequest }

// One answer for every failed sign-in, whether the account exists, has no password yet, is
// disabled or the password is wrong: nothing tells an attacker which accounts exist.
const GENERIC_FAILURE = 'That email and password do not match an account that can sign in.'
const MAX_STATE = 1_000

const AuthorizeQuery = z.object(
  Object.fromEntries(requestParams.map((p) => [p, z.string().optional()])) as Record<
    (typeof requestParams)[number],
    z.ZodOptional<z.ZodString>
  >,
)
const AuthorizeForm = AuthorizeQuery.extend({
  csrf_token: z.string().optional(),
  step: z.enum(['sign_in', 'consent']).optional(),
  email: z.string().optional(),
  password: z.string().optional(),
  decision: z.enum(['allow', 'deny']).optional(),
})

/**
 * The authorization endpoint (RFC 6749 §4.1) for people: sign-in page, consent page, then the
 * redirect with `code`, `state` and `iss` (RFC 9207). Each request runs the same steps:
 * check client and redirect URI → check the rest → find or start the session → consent → code.
 */
/** An HTML page answer (the sign-in pages work without JavaScript). */
const html = (description: string) => ({ description, content: { 'text/html': { schema: z.string() } } })

export function authorizeRoutes({
  clients,
  people,
  issuer,
  trustProxy,
  clock,
}: {
  clients: ClientRegistry
  people: People
  issuer: string
  clock: Clock
  /** Whose address a failed sign-in counts against behind the operator's proxy (docs/security.md, Resource limits). */
  trustProxy: boolean
}) {
  const app = new OpenAPIHono<AppEnv>()
  const secure = issuer.startsWith('https:')
  // RFC 6265bis §4.1.3.2: a __Host- cookie is Secure, host-only and path /, so no sibling domain can plant it.
  const cookieName = (name: string) => (secure ? `__Host-rxtrace_${name}` : `rxtrace_${name}`)
  const SESSION = cookieName('session')
  const CSRF = cookieName('csrf')
  const cookieOptions = { httpOnly: true, secure, sameSite: 'Lax', path: '/' } as const

  /** Step 1: an unknown client or a redirect URI not registered exactly is shown on a page, never redirected to (RFC 6749 §4.1.2.1). */
  async function checkClientAndRedirect(c: Context, request: AuthorizationRequest): Promise<Checked | Response> {
    if (!request.client_id) return messagePage(c, 'Sign-in request not valid', 'The app did not say who it is (client_id is missing).')
    const client = await clients.find(request.client_id, { usable: true })
    if (!client || !client.grant_types.includes('authorization_code'))
      return messagePage(c, 'Sign-in request not valid', 'The app asking you to sign in is not registered for sign-in here.')
    // RFC 9700 §4.1.3: exact string comparison, no pattern and no default.
    if (!request.redirect_uri || !client.redirect_uris.includes(request.redirect_uri)) {
      return messagePage(
        c,
        'Sign-in request not valid',
        'The app asked to send you back to an address it has not registered. You were not redirected.',
      )
    }
    return { client, redirectUri: request.redirect_uri, request }
  }

  /** RFC 6749 §4.1.2 / §4.1.2.1 with RFC 9207: back to the client with the result, `state` intact and our `iss`. */
  function redirectBack(c: Context, { redirectUri, request }: Checked, result: Record<string, string>, status: 302 | 303): Response {
    const url = new URL(redirectUri)
    for (const [k, v] of Object.entries(result)) url.searchParams.set(k, v)
    if (request.state !== undefined) url.searchParams.set('state', request.state)
    url.searchParams.set('iss', issuer)
    c.header('Cache-Control', 'no-store')
    c.header('Referrer-Policy', 'no-referrer')
    return c.redirect(url.toString(), status) // keeps the cookies set on the way
  }

  /** Step 2: what is wrong with the rest of the request, as an RFC 6749 §4.1.2.1 error, or null. */
  function requestError({ request }: Checked): { error: string; error_description: string } | null {
    if (request.response_type !== 'code')
      return { error: 'unsupported_response_type', error_description: 'Only response_type=code is supported.' }
    if (!request.state) return { error: 'invalid_request', error_description: 'Send a state parameter.' }
    if (request.state.length > MAX_STATE)
      return { error: 'invalid_request', error_description: `state is longer than ${MAX_STATE} characters.` }
    // RFC 9700 §2.1.1: PKCE for every client; RFC 7636 §4.4.1: S256 only, `plain` refused.
    if (!request.code_challenge)
      return { error: 'invalid_request', error_description: 'PKCE is required: send code_challenge and code_challenge_method=S256.' }
    if (request.code_challenge_method !== 'S256')
      return { error: 'invalid_request', error_description: 'code_challenge_method must be S256.' }
    if (!S256_CHALLENGE.test(request.code_challenge))
      return { error: 'invalid_request', error_description: 'code_challenge is not an S256 challenge (43 base64url characters).' }
    if (request.max_age !== undefined && !/^\d{1,9}$/.test(request.max_age))
      return { error: 'invalid_request', error_description: 'max_age is a number of seconds.' }
    const unknown = parseScope(request.scope).filter((s) => !isScope(s))
    if (unknown.length) return { error: 'invalid_scope', error_description: `Unknown scope: ${unknown.join(' ')}.` }
    return null
  }

  /** A pre-session CSRF token (double-submit cookie): set on first sight, echoed by every form. */
  function csrfToken(c: Context): string {
    const existing = getCookie(c, CSRF)
    if (existing && /^[\w-]{43}$/.test(existing)) return existing
    const token = randomBytes(32).toString('base64url')
    setCookie(c, CSRF, token, cookieOptions)
    return token
  }

  function csrfValid(c: Context, presented: string | undefined): boolean {
    const cookie = getCookie(c, CSRF)
    if (!cookie || !presented) return false
    const a = Buffer.from(cookie)
    const b = Buffer.from(presented)
    return a.length === b.length && timingSafeEqual(a, b)
  }

  // The address the per-address throttles count: the proxy's last X-Forwarded-For entry when trusted, not the proxy itself.
  const clientAddress = (c: Context) => callerAddress(c, trustProxy)

  /** Step 4: with consent (or a first-party client), a code bound to client, redirect URI, challenge and user. */
  async function issueCode(c: Context, checked: Checked, user: User, session: Session, status: 302 | 303): Promise<Response> {
    const scopes = userScopes(checked.request.scope, checked.client, user.role)
    const code = await people.codes.issue({
      client_id: checked.client.client_id,
      user_id: user.id,
      session_hash: session.idHash,
      redirect_uri: checked.redirectUri,
      code_challenge: checked.request.code_challenge!,
      scope: scopes.join(' '),
    })
    return redirectBack(c, checked, { code }, status)
  }

  /** A restricted client serves its own tenant's people only: anyone else is told so on a page, and the app gets nothing. */
  async function wrongTenant(c: Context, client: ClientRecord): Promise<Response> {
    const tenant = await clients.tenantOf(client)
    return messagePage(
      c,
      'This app is not for your account',
      `${client.client_name} is only for people of ${tenant?.name ?? 'another organisation'} (a ${tenant?.kind ?? 'tenant'} your account does not belong to). You were not sent back to the app. Ask your administrator which app to use.`,
      403,
    )
  }

  async function afterSignIn(c: Context, checked: Checked, user: User, session: Session, status: 302 | 303): Promise<Response> {
    if (!clientServes(checked.client, user)) return wrongTenant(c, checked.client)
    if (checked.client.first_party) return issueCode(c, checked, user, session, status)
    // RFC 9700 §4.13: consent once per (user, app, scope); asked again only for a scope not yet allowed.
    const scopes = userScopes(checked.request.scope, checked.client, user.role)
    if (await people.consents.covers(user.id, checked.client.client_id, scopes)) return issueCode(c, checked, user, session, status)
    return consentPage(c, {
      appName: checked.client.client_name,
      tenant: await clients.tenantOf(checked.client),
      userName: user.name,
      scopes,
      params: checked.request,
      csrf: csrfToken(c),
      returnTo: new URL(checked.redirectUri).origin,
    })
  }

  const showSignIn = (c: Context, checked: Checked, extra: { email?: string; error?: string; status?: 200 | 401 | 429 } = {}) =>
    signInPage(c, {
      appName: checked.client.client_name,
      params: checked.request,
      csrf: csrfToken(c),
      returnTo: new URL(checked.redirectUri).origin,
      ...extra,
    })

  app.openapi(
    publicRoute({
      method: 'get',
      path: '/oauth/authorize',
      operationId: 'authorize',
      tags: ['OAuth'],
      summary: 'Start a person’s sign-in (authorization_code with PKCE S256)',
      description:
        'A browser page, not an API call: shows the sign-in page (and, for clients not marked first-party, a consent page), then redirects to the registered redirect_uri with `code`, `state` and `iss` (RFC 9207). Errors in client_id or redirect_uri are shown on a page; later errors are redirected per RFC 6749 §4.1.2.1.',
      request: { query: AuthorizeQuery },
      responses: {
        200: html('The sign-in or consent page (HTML)'),
        302: { description: 'Back to the client with code, state and iss, or with error' },
        400: html('An error page (HTML)'),
        403: html('The app is restricted to a pharmacy or fleet the signed-in person does not belong to (HTML)'),
      },
    }),
    async (c) => {
      const request = pick(c.req.valid('query'))
      const checked = await checkClientAndRedirect(c, request)
      if (checked instanceof Response) return checked
      const error = requestError(checked)
      if (error) return redirectBack(c, checked, error, 302)
      const session = await people.sessions.resume(getCookie(c, SESSION))
      const user = session && (await people.users.find(session.userId))
      if (!session || !user || signedInTooLongAgo(session, checked.request, clock.now())) return showSignIn(c, checked)
      return afterSignIn(c, checked, user, session, 302)
    },
  )

  // The sign-in and consent forms post here (RFC 6749 §3.1 allows POST at this endpoint).
  app.openapi(
    publicRoute({
      method: 'post',
      path: '/oauth/authorize',
      operationId: 'submitSignInForm',
      tags: ['OAuth'],
      summary: 'The sign-in and consent forms of /oauth/authorize',
      description:
        "Posted by the pages themselves, with the authorization request's parameters and a CSRF token bound to a pre-session cookie. Failed sign-ins are throttled per account and per address (5 in 15 min).",
      request: { body: { content: { 'application/x-www-form-urlencoded': { schema: AuthorizeForm } }, required: true } },
      responses: {
        200: html('The next page (HTML)'),
        303: { description: 'Back to the client with code, state and iss, or with error' },
        401: html('Sign-in failed (HTML)'),
        403: html('The app is restricted to a pharmacy or fleet the signed-in person does not belong to (HTML)'),
        429: html('Too many failed sign-ins (HTML, Retry-After)'),
      },
    }),
    async (c) => {
      const form = c.req.valid('form') as Record<string, string | undefined>
      const checked = await checkClientAndRedirect(c, pick(form))
      if (checked instanceof Response) return checked
      const error = requestError(checked)
      if (error) return redirectBack(c, checked, error, 303)
      if (!csrfValid(c, form.csrf_token))
        return messagePage(
          c,
          'Please try again',
          'This form expired or was not sent from this site. Go back to the app and start signing in again.',
          400,
        )

      if (form.step === 'sign_in') {
        const email = (form.email ?? '').trim().toLowerCase()
        const keys = [`account:${email}`, `address:${clientAddress(c)}`]
        const waitMs = await people.throttle.waitMs(keys)
        if (waitMs > 0) {
          c.header('Retry-After', String(Math.ceil(waitMs / 1_000)))
          return showSignIn(c, checked, {
            email,
            status: 429,
            error: `Too many failed attempts. Try again in ${Math.ceil(waitMs / 60_000)} minute(s).`,
          })
        }
        const user = await people.users.checkPassword(email, form.password ?? '')
        if (!user) {
          await people.throttle.fail(keys)
          return showSignIn(c, checked, { email, status: 401, error: GENERIC_FAILURE })
        }
        await people.throttle.succeed(keys[0]!)
        // A new session id at every sign-in: one planted beforehand is never promoted (session fixation).
        const previous = await people.sessions.resume(getCookie(c, SESSION))
        if (previous) await people.sessions.end(previous.idHash)
        const { cookieValue, session } = await people.sessions.start(user.id)
        setCookie(c, SESSION, cookieValue, cookieOptions)
        return afterSignIn(c, checked, user, session, 303)
      }

      const session = await people.sessions.resume(getCookie(c, SESSION))
      const user = session && (await people.users.find(session.userId))
      if (!session || !user) return showSignIn(c, checked)
      if (form.step === 'consent' && !checked.client.first_party) {
        if (form.decision !== 'allow') {
          await people.consents.forget(user.id, checked.client.client_id)
          return redirectBack(c, checked, { error: 'access_denied', error_description: 'The user did not allow access.' }, 303)
        }
        if (!clientServes(checked.client, user)) return wrongTenant(c, checked.client)
        await people.consents.remember(user.id, checked.client.client_id, userScopes(checked.request.scope, checked.client, user.role))
        return issueCode(c, checked, user, session, 303)
      }
      return afterSignIn(c, checked, user, session, 303)
    },
  )

  app.openapi(
    publicRoute({
      method: 'post',
      path: '/oauth/logout',
      operationId: 'logout',
      tags: ['OAuth'],
      summary: 'End the browser session of the sign-in pages',
      description:
        'Ends the session named by the session cookie, revokes the refresh tokens (and their access tokens) issued under it, and forgets the consent the person gave third-party apps. SameSite=Lax keeps other sites from posting here with the cookie.',
      responses: { 200: html('A signed-out page (HTML)') },
    }),
    async (c) => {
      const session = await people.sessions.resume(getCookie(c, SESSION))
      if (session) {
        await people.sessions.end(session.idHash)
        await people.refreshTokens.revokeForSession(session.idHash)
        await people.consents.forget(session.userId) // signing out also forgets what the person allowed third-party apps
      }
      deleteCookie(c, SESSION, cookieOptions)
      return messagePage(c, 'Signed out', 'You are signed out of rxtrace.', 200)
    },
  )
  return app
}

/**
 * OIDC Core §3.1.2.1 `max_age`, as RFC 9470 §4 asks a client to send after a step-up challenge:
 * a session whose password was entered longer ago than that asks for the password again.
 */
function signedInTooLongAgo(session: Session, request: AuthorizationRequest, nowMs: number): boolean {
  if (request.max_age === undefined) return false
  return nowMs / 1_000 - session.authTime > Number(request.max_age)
}

function pick(source: Record<string, string | undefined>): AuthorizationRequest {
  const request: AuthorizationRequest = {}
  for (const p of requestParams) if (typeof source[p] === 'string') request[p] = source[p]
  return request
}
