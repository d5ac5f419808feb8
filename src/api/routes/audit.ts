import { OpenAPIHono } from '@hono/zod-openapi'
import { ofTenant, shownEntry, type AuditLog, type AuditTenant } from '../../auth/audit-log.js'
import type { Principal } from '../../auth/scopes.js'
import { validationFailed } from '../../errors.js'
import type { Db } from '../../store/schema.js'
import type { AppEnv } from '../env.js'
import { json, pageOf, pageQuery, v1Route, z } from '../openapi.js'
import { decodeCursor, encodeCursor } from '../../store/pagination.js'

const AuditEvent = z
  .object({
    pos: z.number().int().optional().describe('Position in the deployment-wide chain; only for unrestricted tokens'),
    at: z.string(),
    jti: z.string().nullable(),
    client_id: z.string().nullable(),
    sub: z.string().nullable(),
    method: z.string(),
    path: z.string(),
    status: z.number().int(),
    request_id: z.string(),
    pharmacy_id: z.string().optional().describe('The tenant of the token that made the request; absent when it had none'),
    fleet_id: z.string().optional().describe('The tenant of the token that made the request; absent when it had none'),
    prev_hash: z.string().optional().describe('Only for unrestricted tokens'),
    hash: z.string(),
  })
  .openapi('AuditEvent')

// A page of verification is at most this many records: ~0.4 s of hashing, done in chunks that
// yield to the event loop, so one call never holds the service.
const MAX_VERIFY_PAGE = 10_000
const DEFAULT_VERIFY_PAGE = 1_000

const Verdict = z
  .object({
    scope: z
      .enum(['deployment', 'tenant'])
      .describe("`deployment`: the whole chain (unrestricted tokens). `tenant`: the records of the caller's pharmacy or fleet"),
    valid: z.boolean(),
    checked: z.number().int().describe('Records found good in this page'),
    head: z.string().nullable().describe('Hash of the last good record of the page'),
    first_bad_pos: z.number().int().optional().describe('The first record that does not add up'),
    next_cursor: z.string().nullable().describe('Where the next page starts; null when every record has been checked'),
  })
  .openapi('AuditVerdict')

export function auditRoutes(db: Db, audit: AuditLog) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('audit:read', {
      method: 'get',
      path: '/v1/audit-events',
      operationId: 'listAuditEvents',
      tags: ['Audit'],
      summary: 'The hash-chained record of every authenticated request',
      description:
        "A token restricted to a pharmacy or fleet (a client's or a person's) sees only the records of requests made with that tenant's tokens, whoever made them and through whichever app, without `pos` and `prev_hash` (which count other tenants' requests). Records written before tenants were recorded are shown to unrestricted tokens only.",
      request: { query: pageQuery.extend({ client_id: z.string().optional() }) },
      responses: { 200: json(pageOf(AuditEvent), 'A page of audit records, oldest first') },
    }),
    async (c) => {
      await audit.flush()
      const principal = c.get('principal')
      const q = c.req.valid('query')
      const tenant = tenantOf(principal)
      let query = db.selectFrom('audit_events').selectAll()
      if (tenant) query = ofTenant(query, tenant)
      if (q.client_id) query = query.where('client_id', '=', q.client_id)
      if (q.cursor) query = query.where('pos', '>', await cursorPosition(db, tenant, q.cursor))
      const rows = await query
        .orderBy('pos')
        .limit(q.limit + 1)
        .execute()
      const data = rows.slice(0, q.limit).map(shownEntry)
      const last = data.at(-1)
      if (!tenant) return c.json({ data, next_cursor: rows.length > q.limit ? encodeCursor(last!.pos) : null }, 200)
      // The chain's positions and links count every tenant's requests: a restricted token sees its
      // own records without them, and pages by the last record's hash instead of its position.
      return c.json(
        {
          data: data.map(({ pos: _pos, prev_hash: _prev, ...own }) => own),
          next_cursor: rows.length > q.limit ? encodeCursor(last!.hash) : null,
        },
        200,
      )
    },
  )

  app.openapi(
    v1Route('audit:read', {
      method: 'get',
      path: '/v1/audit-events/verify',
      operationId: 'verifyAuditChain',
      tags: ['Audit'],
      summary: 'Recompute the audit hash chain, a page at a time',
      description:
        "An unrestricted token verifies the deployment's whole chain, links included; a token restricted to a pharmacy or fleet verifies its own client's records. " +
        'Each call checks at most `limit` records after `cursor`; follow `next_cursor` until it is null.',
      request: {
        query: z.object({
          limit: z.coerce
            .number()
            .int()
            .min(1)
            .max(MAX_VERIFY_PAGE)
            .default(DEFAULT_VERIFY_PAGE)
            .describe(`Records to check, 1–${MAX_VERIFY_PAGE}`),
          cursor: z.string().max(200).optional().describe('`next_cursor` of the previous page'),
        }),
      },
      responses: { 200: json(Verdict, 'The verdict on this page') },
    }),
    async (c) => {
      const principal = c.get('principal')
      const q = c.req.valid('query')
      const tenant = tenantOf(principal)
      const verdict = await audit.verify({
        tenant: tenant ?? undefined,
        afterPos: q.cursor ? await cursorPosition(db, tenant, q.cursor) : 0,
        limit: q.limit,
      })
      const { next_pos, ...rest } = verdict
      // A tenant's cursor is its last record's hash, as in the list: a position would count other tenants' requests.
      const next = next_pos === null ? null : encodeCursor(tenant ? verdict.head! : next_pos)
      return c.json({ ...rest, next_cursor: next }, 200)
    },
  )
  return app
}

/** A restricted token reads its tenant's records (docs/api.md, Audit log); null: unrestricted, the whole log. */
const tenantOf = (principal: Principal): AuditTenant | null =>
  principal.pharmacyId || principal.fleetId ? { pharmacyId: principal.pharmacyId, fleetId: principal.fleetId } : null

/** Where a page starts: after a position (unrestricted), or after one of the tenant's own records named by its hash. */
async function cursorPosition(db: Db, tenant: AuditTenant | null, cursor: string): Promise<number> {
  const key = decodeCursor(cursor)
  if (!tenant) return Number(key)
  const anchor = await ofTenant(db.selectFrom('audit_events').select('pos'), tenant).where('hash', '=', key).executeTakeFirst()
  if (!anchor) throw validationFailed([{ pointer: '/query/cursor', message: 'is not a cursor this API returned' }])
  return anchor.pos
}
