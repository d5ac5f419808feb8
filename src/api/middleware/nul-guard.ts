import type { Context, MiddlewareHandler } from 'hono'
import { validationFailed } from '../../errors.js'
import type { AppEnv } from '../env.js'
import { queryPointer } from './query-guard.js'

/*
 * U+0000 (NUL) is in no id, token, name or text of ours, and PostgreSQL refuses it in a text
 * parameter: a lookup with one in a path, query, form or Basic credentials answered 500 there
 * (SQLite answered 404). A request carrying one is refused before anything reads it: 422
 * `validation_failed` pointing at it, or OAuth's `invalid_request` under /oauth. JSON bodies are
 * `strict-json.ts`'s to refuse, with the same rule.
 */

const ENCODED_NUL = /%00/
const MESSAGE = 'holds U+0000 (NUL), which no id, token or text of ours holds'

/** Refuses a path, query or Basic credentials with a NUL in them; mounted for every route, before their own middleware. */
export function nulGuard(): MiddlewareHandler<AppEnv> {
  return async function nulGuardMiddleware(c, next) {
    const pointer = nulInUrl(c.req.url) ?? nulInBasicCredentials(c.req.header('authorization'))
    if (pointer !== null) return refuse(c, pointer)
    await next()
  }
}

/** Refuses a form (application/x-www-form-urlencoded) with a NUL in it; mounted after `bodySizeLimit`, which read it. */
export function formNulGuard(): MiddlewareHandler<AppEnv> {
  return async function formNulGuardMiddleware(c, next) {
    if (/^application\/x-www-form-urlencoded/i.test(c.req.header('content-type') ?? '')) {
      const form = await c.req.text()
      if (ENCODED_NUL.test(form) || form.includes('\u0000')) return refuse(c, '/body')
    }
    await next()
  }
}

const PART: Record<string, string> = { path: 'path', query: 'query', headers: 'Authorization header', body: 'form' }

function refuse(c: Context<AppEnv>, pointer: string): Response {
  if (c.req.path.startsWith('/oauth/')) {
    const part = PART[pointer.split('/')[1]!]
    return c.json({ error: 'invalid_request', error_description: `The request's ${part} ${MESSAGE}.` }, 400)
  }
  throw validationFailed([{ pointer, message: MESSAGE }])
}

function nulInUrl(url: string): string | null {
  if (!ENCODED_NUL.test(url)) return null
  const query = url.indexOf('?')
  if (query === -1 || ENCODED_NUL.test(url.slice(0, query))) return '/path'
  for (const pair of url.slice(query + 1).split('&')) {
    if (ENCODED_NUL.test(pair)) return queryPointer(pair.split('=')[0]!)
  }
  return '/query'
}

// RFC 7617 credentials, base64 of `id:secret`, each form-encoded by OAuth clients (RFC 6749 §2.3.1).
function nulInBasicCredentials(header: string | undefined): string | null {
  if (!header || !/^basic /i.test(header)) return null
  const credentials = Buffer.from(header.slice(6).trim(), 'base64').toString('latin1')
  return credentials.includes('\u0000') || ENCODED_NUL.test(credentials) ? '/headers/authorization' : null
}
