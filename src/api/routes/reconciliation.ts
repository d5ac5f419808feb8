import { OpenAPIHono } from '@hono/zod-openapi'
import { iso } from '../../clock.js'
import { AppError, validationFailed } from '../../errors.js'
import { CSV_COLUMNS, csvRow, type PeriodReader, type ReconciliationService } from '../../services/reconciliation.js'
import { parseStatement, type StatementFormat } from '../../services/statement.js'
import type { OtherBody } from '../middleware/body-guard.js'
import type { AppEnv } from '../env.js'
import { idParam, v1Route, z } from '../openapi.js'
import { prefersCsv } from './temperature.js'

/** An operator's statement may be larger than a JSON request: about 70,000 lines (docs/fleet.md). */
const STATEMENT_MAX_BYTES = 4 * 1024 * 1024

const STATEMENT_TYPES: Record<string, StatementFormat> = {
  'application/x-ndjson': 'jsonl',
  'application/jsonl': 'jsonl',
  'application/json-lines': 'jsonl',
  'text/csv': 'csv',
}

/** What the body guard lets through for the statement route: its own limit and media types. */
export const statementBody: OtherBody = {
  method: 'POST',
  path: /^\/v1\/fleets\/[^/]+\/reconciliation$/,
  maxBytes: STATEMENT_MAX_BYTES,
  types: /^(application\/(x-ndjson|jsonl|json-lines)|text\/csv)$/i,
}

const CSV_MEDIA_TYPE = 'text/csv; charset=utf-8; header=present'

const PeriodQuery = z.object({
  from: z.iso.datetime({ offset: true }).describe('Period start, inclusive (RFC 3339): deliveries whose end was recorded at or after it'),
  to: z.iso.datetime({ offset: true }).describe('Period end, exclusive (RFC 3339)'),
})

const amounts = {
  base_cents: z.number().int(),
  distance_cents: z.number().int(),
  cold_chain_cents: z.number().int(),
  failed_attempt_cents: z.number().int(),
  after_hours_cents: z.number().int(),
  gross_cents: z.number().int(),
  commission_cents: z.number().int(),
  payout_cents: z.number().int(),
}

const lineExample = {
  delivery_id: 'dl_01jd0000000000000000000000',
  pharmacy_id: 'ph_01jd0000000000000000000000',
  outcome: 'delivered',
  ended_at: '2026-11-20T21:14:03.120Z',
  rate_card_version: 2,
  distance_km: 7.412,
  after_hours: true,
  cold_chain: true,
  base_cents: 650,
  distance_cents: 630,
  cold_chain_cents: 300,
  failed_attempt_cents: 0,
  after_hours_cents: 790,
  gross_cents: 2370,
  commission_cents: 284,
  payout_cents: 2086,
}
const totalsExample = {
  lines: 1,
  base_cents: 650,
  distance_cents: 630,
  cold_chain_cents: 300,
  failed_attempt_cents: 0,
  after_hours_cents: 790,
  gross_cents: 2370,
  commission_cents: 284,
  payout_cents: 2086,
}

const ReconciliationLine = z
  .object({
    delivery_id: z.string(),
    pharmacy_id: z.string(),
    outcome: z.enum(['delivered', 'failed']).describe('`failed`: the delivery ended FAILED or RETURNED and earns the failed-attempt fee'),
    ended_at: z.string().describe('When the end was recorded; the line belongs to the period containing it'),
    rate_card_version: z.number().int().nullable().describe('The version in force at dispatch; null (all amounts 0) when none was'),
    distance_km: z.number().nullable().describe('Great-circle km from pickup to the end; null when a place is unknown (charged as 0)'),
    after_hours: z.boolean(),
    cold_chain: z.boolean(),
    ...amounts,
  })
  .openapi('ReconciliationLine', { example: lineExample })

const Reconciliation = z
  .object({
    fleet_id: z.string(),
    from: z.string(),
    to: z.string(),
    currency: z.string().nullable(),
    lines: z.array(ReconciliationLine),
    totals: z.object({ lines: z.number().int(), ...amounts }).describe('Sums of the lines, to the cent'),
  })
  .openapi('Reconciliation', {
    example: {
      fleet_id: 'fl_01jd0000000000000000000000',
      from: '2026-11-01T00:00:00.000Z',
      to: '2026-12-01T00:00:00.000Z',
      currency: 'USD',
      lines: [lineExample],
      totals: totalsExample,
    },
  })

const StatementComparison = z
  .object({
    from: z.string(),
    to: z.string(),
    matched: z.number().int().describe('Lines where both payouts agree'),
    mismatched: z.array(
      z.object({
        delivery_id: z.string(),
        ours: z.number().int(),
        theirs: z.number().int(),
        difference: z.number().int().describe('theirs − ours'),
      }),
    ),
    missing_from_statement: z.array(z.object({ delivery_id: z.string(), ours: z.number().int() })),
    unknown_in_statement: z.array(z.object({ delivery_id: z.string(), theirs: z.number().int() })),
    totals: z.object({ ours: z.number().int(), theirs: z.number().int(), difference: z.number().int() }),
  })
  .openapi('StatementComparison', {
    example: {
      from: '2026-11-01T00:00:00.000Z',
      to: '2026-12-01T00:00:00.000Z',
      matched: 412,
      mismatched: [{ delivery_id: 'dl_01jd0000000000000000000000', ours: 2086, theirs: 2100, difference: 14 }],
      missing_from_statement: [],
      unknown_in_statement: [],
      totals: { ours: 802311, theirs: 802325, difference: 14 },
    },
  })

/** `GET|POST /v1/fleets/{id}/reconciliation` (docs/fleet.md, Reconciliation). */
export function reconciliationRoutes(reconciliation: ReconciliationService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('fleet:read', {
      method: 'get',
      path: '/v1/fleets/{id}/reconciliation',
      tags: ['Fleet money'],
      operationId: 'getFleetReconciliation',
      summary: "A period's reconciliation: a line per ended delivery and the totals",
      description:
        'Streamed a chunk at a time. JSON by default; `Accept: text/csv` gives the lines as RFC 4180 CSV (`' +
        CSV_COLUMNS.join(',') +
        "`). The fleet's own tokens and unrestricted clients only.",
      request: { params: idParam('fl'), query: PeriodQuery },
      responses: {
        200: {
          description: 'The reconciliation',
          content: {
            'application/json': { schema: Reconciliation },
            'text/csv': { schema: z.string().describe(CSV_COLUMNS.join(',')), example: `${CSV_COLUMNS.join(',')}\r\n` },
          },
        },
      },
    }),
    async (c) => {
      const reader = await reconciliation.open(c.get('principal'), c.req.valid('param').id, periodOf(c.req.valid('query')))
      const csv = prefersCsv(c.req.header('accept'))
      const body = csv ? csvStream(reader) : jsonStream(reader, await reader.currency())
      return c.body(
        body,
        200,
        csv
          ? {
              'content-type': CSV_MEDIA_TYPE,
              'content-disposition': `inline; filename="${reader.fleetId}-reconciliation.csv"`,
              vary: 'Accept',
            }
          : { 'content-type': 'application/json', vary: 'Accept' },
      )
    },
  )

  app.openapi(
    v1Route('fleet:read', {
      method: 'post',
      path: '/v1/fleets/{id}/reconciliation',
      tags: ['Fleet money'],
      operationId: 'checkFleetStatement',
      summary: "Check the operator's statement against the period's reconciliation",
      description:
        'Body: JSON lines (`application/x-ndjson`, one `{"delivery_id","payout_cents"}` per line) or CSV (`text/csv`, a header row naming `delivery_id` and `payout_cents`), at most 4 MiB (larger: 413). Any malformed line → 422 naming the first 100 bad lines as `/lines/<n>`, with `errors_omitted` counting the rest. Nothing is stored.',
      request: {
        params: idParam('fl'),
        query: PeriodQuery,
        body: {
          required: true,
          content: {
            'application/x-ndjson': {
              schema: z.string(),
              example: '{"delivery_id":"dl_01jd0000000000000000000000","payout_cents":2100}\n',
            },
            'text/csv': { schema: z.string(), example: 'delivery_id,payout_cents\r\ndl_01jd0000000000000000000000,2100\r\n' },
          },
        },
      },
      responses: { 200: { description: 'How the statement compares', content: { 'application/json': { schema: StatementComparison } } } },
    }),
    async (c) => {
      await reconciliation.authorize(c.get('principal'), c.req.valid('param').id)
      const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase()
      const format = STATEMENT_TYPES[type]
      if (!format) throw new AppError('unsupported_media_type', 'Send the statement as application/x-ndjson (JSON lines) or text/csv.')
      const parsed = await parseStatement(await c.req.text(), format)
      if (!parsed.ok)
        throw validationFailed(
          parsed.errors,
          `The statement has ${parsed.badLines} malformed line(s); nothing was compared.`,
          parsed.badLines,
        )
      return c.json(
        await reconciliation.compare(c.get('principal'), c.req.valid('param').id, periodOf(c.req.valid('query')), parsed.payouts),
        200,
      )
    },
  )
  return app
}

/** The period as stored times compare: normalised to `toISOString` form, `to` after `from`. */
function periodOf(query: { from: string; to: string }): { from: string; to: string } {
  const from = iso(Date.parse(query.from))
  const to = iso(Date.parse(query.to))
  if (to <= from) throw validationFailed([{ pointer: '/query/to', message: 'must be after from' }])
  return { from, to }
}

// Text handed to the socket in pieces about this large: fewer, larger writes, still bounded.
const FLUSH_BYTES = 64 * 1024

/**
 * A body that pulls lines from the store only as fast as the client reads them: the stream asks
 * for more (`pull`) when its queue has room, so memory holds one chunk of rows and one piece of text.
 */
function textStream(pieces: AsyncGenerator<string>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let text = ''
        while (text.length < FLUSH_BYTES) {
          const next = await pieces.next()
          if (next.done) {
            if (text) controller.enqueue(encoder.encode(text))
            controller.close()
            return
          }
          text += next.value
        }
        controller.enqueue(encoder.encode(text))
      },
      async cancel() {
        await pieces.return(undefined)
      },
    },
    { highWaterMark: 1 },
  )
}

function jsonStream(reader: PeriodReader, currency: string | null): ReadableStream<Uint8Array> {
  return textStream(
    (async function* () {
      const head = { fleet_id: reader.fleetId, from: reader.period.from, to: reader.period.to, currency }
      yield `${JSON.stringify(head).slice(0, -1)},"lines":[`
      let first = true
      for await (const chunk of reader.chunks()) {
        yield (first ? '' : ',') + chunk.map((line) => JSON.stringify(line)).join(',')
        first = false
      }
      yield `],"totals":${JSON.stringify(reader.totals)}}`
    })(),
  )
}

function csvStream(reader: PeriodReader): ReadableStream<Uint8Array> {
  return textStream(
    (async function* () {
      yield `${CSV_COLUMNS.join(',')}\r\n`
      for await (const chunk of reader.chunks()) yield chunk.map(csvRow).join('')
    })(),
  )
}
