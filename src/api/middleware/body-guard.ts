import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { AppError } from '../../errors.js'
import type { AppEnv } from '../env.js'

export const MAX_BODY_BYTES = 256 * 1024 // SPEC §2

const json = /^application\/([\w.-]+\+)?json$/i

/** Refuses bodies that are too large (413) or not JSON (415) before any handler sees them. */
export function bodyGuard(): MiddlewareHandler<AppEnv>[] {
  const mediaType: MiddlewareHandler<AppEnv> = async function requireJson(c, next) {
    const hasBody = c.req.header('content-length') !== undefined ? c.req.header('content-length') !== '0' : c.req.header('transfer-encoding') !== undefined
    if (['POST', 'PUT', 'PATCH'].includes(c.req.method) && hasBody) {
      const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim()
      if (!json.test(type)) {
        throw new AppError('unsupported_media_type', `Send the body as application/json (got ${type ? `"${type}"` : 'no content type'}).`)
      }
    }
    await next()
  }
  const size = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: () => {
      throw new AppError('payload_too_large', 'The request body is larger than 256 KiB.')
    },
  })
  return [size as MiddlewareHandler<AppEnv>, mediaType]
}
