import type { MiddlewareHandler } from 'hono'
import type { AuditLog } from '../../auth/audit-log.js'
import { AppError } from '../../errors.js'
import type { AppEnv } from '../env.js'

/** Every authenticated request leaves an audit record, whatever its outcome (docs/api.md, Audit log). */
export function auditTrail({ audit }: { audit: AuditLog }): MiddlewareHandler<AppEnv> {
  return async function auditMiddleware(c, next) {
    let status = 500
    try {
      await next()
      status = c.res.status
    } catch (error) {
      // The error becomes a response further out; record the status it will get.
      status = error instanceof AppError ? error.status : ((error as { status?: number }).status ?? 500)
      throw error
    } finally {
      const principal = c.get('principal')
      audit.record({
        jti: principal.jti,
        client_id: principal.clientId,
        sub: principal.sub,
        pharmacy_id: principal.pharmacyId,
        fleet_id: principal.fleetId,
        method: c.req.method,
        path: c.req.path,
        status,
        request_id: c.get('requestId'),
      })
    }
  }
}
