import type { MiddlewareHandler } from 'hono'
import { validationFailed, type FieldError } from '../../errors.js'
import { RESERVED_MEMBER_NAMES, toPointer } from '../../strict-json.js'
import type { AppEnv } from '../env.js'

/**
 * The query string gets the body's rules (see `parseJsonBody`): a parameter whose name or value
 * is not percent-encoded UTF-8 would reach the handler as the literal `%FF` (hono keeps what it
 * cannot decode), and a reserved name such as `__proto__` would be dropped by validation without
 * a word. Both are 422 `validation_failed`, pointing at `/query/<name>`.
 */
export function queryGuard(): MiddlewareHandler<AppEnv> {
  return async function queryGuardMiddleware(c, next) {
    const url = c.req.url
    const start = url.indexOf('?')
    if (start === -1) return next()
    const end = url.indexOf('#', start)
    const problems = queryProblems(url.slice(start + 1, end === -1 ? undefined : end))
    if (problems.length > 0) throw validationFailed(problems)
    await next()
  }
}

function queryProblems(query: string): FieldError[] {
  const problems: FieldError[] = []
  for (const pair of query.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const rawName = eq === -1 ? pair : pair.slice(0, eq)
    const name = formDecoded(rawName)
    const pointer = queryPointer(rawName, name)
    if (name === null || (eq !== -1 && formDecoded(pair.slice(eq + 1)) === null)) {
      problems.push({ pointer, message: 'is not percent-encoded UTF-8' })
    } else if (RESERVED_MEMBER_NAMES.has(name)) {
      problems.push({ pointer, message: `"${name}" is a reserved parameter name` })
    }
  }
  return problems
}

/**
 * Where a problem with the parameter named `rawName` (as sent; `name` decoded, when the caller has
 * it) is: `/query/<name>`, decoded; a name that is not UTF-8 as sent, and a NUL in it as `\u0000`.
 */
export function queryPointer(rawName: string, name = formDecoded(rawName)): string {
  return `/query${toPointer([name?.replaceAll('\u0000', '\\u0000') ?? rawName])}`
}

/** application/x-www-form-urlencoded decoding (WHATWG URL §5.1), or null for invalid UTF-8 or escapes. */
function formDecoded(text: string): string | null {
  if (text.indexOf('%') === -1) return text.indexOf('+') === -1 ? text : text.replace(/\+/g, ' ')
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return null
  }
}
