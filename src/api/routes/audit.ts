import { OpenAPIHono } from '@hono/zod-openapi'
import type { AuditLog } from '../../auth/audit-log.js'
import type { Db } from '../../store/schema.js'
import type { AppEnv } from '../env.js'
import { json, pageOf, pageQuery, v1Route, z } from '../openapi.js'
import { decodeCursor, encodeCursor } from '../../services/pagination.js'

const AuditEvent = z.object({
  pos: z.number().int(), at: z.string(), jti: z.string().nullable(), client_id: z.string().nullable(), sub: z.string().nullable(),
  method: z.string(), path: z.string(), status: z.number().int(), request_id: z.string(), prev_hash: z.string(), hash: z.string(),
}).openapi('AuditEvent')

export function auditRoutes(db: Db, audit: AuditLog) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(v1Route('audit:read', {
    method: 'get', path: '/v1/audit-events', tags: ['Audit'], summary: 'The hash-chained record of every authenticated request',
    description: 'A token restricted to a pharmacy or fleet sees only the records of its own client.',
    request: { query: pageQuery.extend({ client_id: z.string().optional() }) },
    responses: { 200: json(pageOf(AuditEvent), 'A page of audit records, oldest first') },
  }), async (c) => {
    await audit.flush()
    const principal = c.get('principal')
    const q = c.req.valid('query')
    let query = db.selectFrom('audit_events').selectAll()
    if (principal.pharmacyId || principal.fleetId) query = query.where('client_id', '=', principal.clientId)
    if (q.client_id) query = query.where('client_id', '=', q.client_id)
    if (q.cursor) query = query.where('pos', '>', Number(decodeCursor(q.cursor)))
    const rows = await query.orderBy('pos').limit(q.limit + 1).execute()
    const data = rows.slice(0, q.limit)
    return c.json({ data, next_cursor: rows.length > q.limit ? encodeCursor(data.at(-1)!.pos) : null }, 200)
  })

  app.openapi(v1Route('audit:read', {
    method: 'get', path: '/v1/audit-events/verify', tags: ['Audit'], summary: 'Recompute the audit hash chain',
    responses: { 200: json(z.object({ valid: z.boolean(), length: z.number().int(), first_bad_pos: z.number().int().optional() }), 'The verdict') },
  }), async (c) => c.json(await audit.verify(), 200))
  return app
}
