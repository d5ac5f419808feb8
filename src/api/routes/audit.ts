import { OpenAPIHono } from '@hono/zod-openapi'
import { ofTenant, shownEntry, type AuditLog, type AuditTenant } from '../../auth/audit-log.js'
import type { Principal } from '../../auth/scopes.js'
import { validationFailed } from '../../errors.js'
import type { Db } from '../../store/schema.js'
import type { AppEnv } from '../env.js'
import { json, pageOf, pageQuery, v1Route, z } from '../openapi.js'
import { decodeCursor, encodeCursor } from '../../store/pagination.js'
import { storedSignatureSchema } from '../../domain/e-signature.js'
import { csvLine } from '../csv-cells.js'
import { prefersCsv } from './temperature.js'

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
    action: z.string().optional().describe('The operation the request ran (its operationId); absent when no route matched'),
    delivery_id: z.string().optional().describe('The delivery the request concerned; absent when none'),
    signature: storedSignatureSchema
      .optional()
      .describe(
        "On a signature's own record (action `signature.approved`, right after the request that made it): a product stability version's e-signature",
      ),
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

const AuditQuery = pageQuery.extend({
  client_id: z.string().max(200).optional().describe('Only requests made with this client'),
  user: z.string().max(200).optional().describe('Only requests made by this person or client (`sub`)'),
  delivery_id: z.string().max(200).optional().describe('Only requests about this delivery'),
  action: z.string().max(200).optional().describe('Only this operation (an operationId, e.g. `createPrescription`)'),
  from: z.iso.datetime({ offset: true }).optional().describe('At or after this time (RFC 3339)'),
  to: z.iso.datetime({ offset: true }).optional().describe('Before this time (RFC 3339)'),
  format: z.enum(['json', 'csv']).optional().describe('`csv`: the same as `Accept: text/csv`'),
})
type AuditFilters = z.infer<typeof AuditQuery>

const CSV_MEDIA_TYPE = 'text/csv; charset=utf-8; header=present'
const TENANT_COLUMNS = [
  'at',
  'sub',
  'client_id',
  'action',
  'method',
  'path',
  'status',
  'delivery_id',
  'pharmacy_id',
  'fleet_id',
  'request_id',
  'jti',
  'hash',
] as const
const ALL_COLUMNS = ['pos', ...TENANT_COLUMNS, 'prev_hash'] as const
// The CSV export reads this many records at a time, so a long trail streams in bounded memory.
const EXPORT_CHUNK = 500

export function auditRoutes(db: Db, audit: AuditLog) {
  const app = new OpenAPIHono<AppEnv>()

  /** The records `filters` select, after position `afterPos`, oldest first. */
  const select = (tenant: AuditTenant | null, filters: AuditFilters, afterPos: number | null) => {
    let query = db.selectFrom('audit_events').selectAll()
    if (tenant) query = ofTenant(query, tenant)
    if (filters.client_id) query = query.where('client_id', '=', filters.client_id)
    if (filters.user) query = query.where('sub', '=', filters.user)
    if (filters.delivery_id) query = query.where('delivery_id', '=', filters.delivery_id)
    if (filters.action) query = query.where('action', '=', filters.action)
    // `at` is stored as ISO 8601 UTC with milliseconds, which sorts as text in time order.
    if (filters.from) query = query.where('at', '>=', new Date(filters.from).toISOString())
    if (filters.to) query = query.where('at', '<', new Date(filters.to).toISOString())
    if (afterPos !== null) query = query.where('pos', '>', afterPos)
    return query.orderBy('pos')
  }

  app.openapi(
    v1Route('audit:read', {
      method: 'get',
      path: '/v1/audit-events',
      operationId: 'listAuditEvents',
      tags: ['Audit'],
      summary: 'The hash-chained record of every authenticated request',
      description:
        "A token restricted to a pharmacy or fleet (a client's or a person's) sees only the records of requests made with that tenant's tokens, whoever made them and through whichever app, without `pos` and `prev_hash` (which count other tenants' requests). Records written before tenants were recorded are shown to unrestricted tokens only. " +
        "Filters combine (AND). JSON pages by default; `Accept: text/csv` or `format=csv` streams every matching record after `cursor` as RFC 4180 CSV (`limit` does not apply), cells that a spreadsheet would read as a formula prefixed with `'`.",
      request: { query: AuditQuery },
      responses: {
        200: {
          description: 'A page of audit records, oldest first; or all of them as CSV',
          content: {
            'application/json': { schema: pageOf(AuditEvent) },
            'text/csv': { schema: z.string().describe(ALL_COLUMNS.join(',')), example: `${TENANT_COLUMNS.join(',')}\r\n` },
          },
        },
      },
    }),
    async (c) => {
      await audit.flush()
      const principal = c.get('principal')
      const q = c.req.valid('query')
      const tenant = tenantOf(principal)
      const afterPos = q.cursor ? await cursorPosition(db, tenant, q.cursor) : null
      if (q.format === 'csv' || (q.format === undefined && prefersCsv(c.req.header('accept')))) {
        const name = tenant ? (tenant.pharmacyId ?? tenant.fleetId) : 'deployment'
        return c.body(csvExport(tenant, q, afterPos), 200, {
          'content-type': CSV_MEDIA_TYPE,
          'content-disposition': `attachment; filename="${name}-audit.csv"`,
          vary: 'Accept',
        })
      }
      const rows = await select(tenant, q, afterPos)
        .limit(q.limit + 1)
        .execute()
      const data = rows.slice(0, q.limit).map(shownEntry)
      const last = data.at(-1)
      c.header('vary', 'Accept')
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

  /** Every matching record as CSV, read a chunk at a time while the client takes the text. */
  function csvExport(tenant: AuditTenant | null, filters: AuditFilters, afterPos: number | null): ReadableStream<Uint8Array> {
    const columns = tenant ? TENANT_COLUMNS : ALL_COLUMNS
    const encoder = new TextEncoder()
    let after = afterPos
    let started = false
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          if (!started) {
            started = true
            controller.enqueue(encoder.encode(csvLine(columns)))
            return
          }
          const rows = await select(tenant, filters, after).limit(EXPORT_CHUNK).execute()
          if (rows.length > 0) {
            after = rows.at(-1)!.pos
            controller.enqueue(encoder.encode(rows.map((row) => csvLine(columns.map((name) => row[name]))).join('')))
          }
          if (rows.length < EXPORT_CHUNK) controller.close()
        },
      },
      { highWaterMark: 1 },
    )
  }

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
