import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { AppError } from '../../errors.js'
import type { AppEnv } from '../env.js'

export const MAX_BODY_BYTES = 256 * 1024 // SPEC §2

const json = /^application\/([\w.-]+\+)?json$/i

// RFC 9112 §9.6: a refusal sent before the body was read must close the connection; the unread
// rest of the body would otherwise be taken for the next request on a kept-alive connection.
const closeAfterReply = { Connection: 'close' }

/** Refuses bodies that are too large (413) or not JSON (415) before any handler sees them. */
export function bodyGuard(): MiddlewareHandler<AppEnv>[] {
  return [bodySizeLimit(), requireJson()]
}

/** 413 for a body over 256 KiB, declared by Content-Length or found while reading it. */
export function bodySizeLimit(): MiddlewareHandler<AppEnv> {
  return bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new AppError('payload_too_large', 'The request body is larger than 256 KiB.', {}, closeAfterReply)
    },
  }) as MiddlewareHandler<AppEnv>
}

/** 415 for a body that is not JSON. */
export function requireJson(): MiddlewareHandler<AppEnv> {
  return async function requireJsonMiddleware(c, next) {
    // A body is whatever the request carries, declared by Content-Length or not (chunked, or a
    // Request built in-process), unless it declares itself empty.
    const hasBody = c.req.raw.body !== null && c.req.header('content-length') !== '0'
    if (['POST', 'PUT', 'PATCH'].includes(c.req.method) && hasBody) {
      const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim()
      if (!json.test(type)) {
        throw new AppError('unsupported_media_type', `Send the body as application/json (got ${type ? `"${type}"` : 'no content type'}).`, {}, closeAfterReply)
      }
    }
    await next()
  }
}
