import type { Context, MiddlewareHandler } from 'hono'
import { routePath } from 'hono/route'
import type { AuditLog, NewAuditEntry } from '../../auth/audit-log.js'
import { AppError } from '../../errors.js'
import type { AppEnv } from '../env.js'

/** Requests that change nothing: their records may be batched. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])
const DELIVERY_PATH = /^\/v1\/deliveries\/(dl_[^/]+)/

/** The operationId of the route `METHOD /hono/:path`, or null. */
export type ActionOf = (method: string, route: string) => string | null

/**
 * Every authenticated request leaves an audit record, whatever its outcome (docs/api.md, Audit
 * log). A state-changing request's record is committed before its answer leaves: in the
 * transaction of its change when its service records its answer there (`auditInTransaction`),
 * otherwise in a transaction of its own, awaited here. A read's record is batched.
 */
export function auditTrail({ audit, actionOf }: { audit: AuditLog; actionOf: ActionOf }): MiddlewareHandler<AppEnv> {
  return async function auditMiddleware(c, next) {
    const safe = SAFE_METHODS.has(c.req.method)
    let inTransaction = false
    if (!safe)
      c.set('auditInTransaction', async (trx, status, answer, signature) => {
        const entry = withDelivery(entryOf(c, status, actionOf), answer)
        // A signature whose record is not a delivery's (a product stability version's) is its own
        // record in the audit chain, right after the request's, committed with the change.
        if (signature)
          await audit.append(trx, entry, { ...entry, action: `signature.${signature.meaning}`, signature: JSON.stringify(signature) })
        else await audit.append(trx, entry)
        inTransaction = true
      })
    let status = 500
    try {
      await next()
      status = c.res.status
    } catch (error) {
      // The error becomes a response further out; record the status it will get.
      status = error instanceof AppError ? error.status : ((error as { status?: number }).status ?? 500)
      throw error
    } finally {
      if (safe) audit.record(entryOf(c, status, actionOf))
      // A failed answer's change rolled back with the record written in its transaction: write it now.
      else if (!inTransaction || status >= 400) {
        const entry = entryOf(c, status, actionOf)
        // The answer is read only when the path names no delivery: most writes' paths do.
        await audit.commit(entry.delivery_id ? entry : withDelivery(entry, await answerOf(c, status)))
      }
    }
  }
}

function entryOf(c: Context<AppEnv>, status: number, actionOf: ActionOf): NewAuditEntry {
  const principal = c.get('principal')
  return {
    jti: principal.jti,
    client_id: principal.clientId,
    sub: principal.sub,
    pharmacy_id: principal.pharmacyId,
    fleet_id: principal.fleetId,
    method: c.req.method,
    path: c.req.path,
    status,
    request_id: c.get('requestId'),
    action: actionOf(c.req.method, routePath(c, -1)),
    delivery_id: DELIVERY_PATH.exec(c.req.path)?.[1] ?? null,
  }
}

/** The delivery a request concerned: the one in its path (entryOf), else the one its answer names (a prescription's). */
function withDelivery(entry: NewAuditEntry, answer: unknown): NewAuditEntry {
  if (entry.delivery_id) return entry
  const named = answer && typeof answer === 'object' ? (answer as { delivery_id?: unknown }).delivery_id : undefined
  return { ...entry, delivery_id: typeof named === 'string' ? named : null }
}

/** The JSON answer of a write that succeeded outside the in-transaction path; undefined otherwise. */
async function answerOf(c: Context<AppEnv>, status: number): Promise<unknown> {
  if (status >= 300 || !c.res.headers.get('content-type')?.startsWith('application/json')) return undefined
  try {
    return await c.res.clone().json()
  } catch {
    return undefined
  }
}
