import { OpenAPIHono } from '@hono/zod-openapi'
import type { EpcisService } from '../../services/epcis.js'
import type { AppEnv } from '../env.js'
import { idParam, v1Route, z } from '../openapi.js'

/** JSON-LD, the EPCIS 2.0 JSON binding's media type (EPCIS 2.0 §12.1). */
const LD_JSON = 'application/ld+json'

// Shapes for the document and the SDK; GS1's JSON Schema is the full contract (test/epcis checks every answer against it).
const ObjectEvent = z
  .object({
    type: z.literal('ObjectEvent'),
    eventID: z.string(),
    eventTime: z.string(),
    recordTime: z.string(),
    eventTimeZoneOffset: z.string(),
    action: z.literal('OBSERVE'),
    bizStep: z.enum(['shipping', 'transporting', 'dispensing', 'receiving']),
    disposition: z.enum(['in_transit', 'dispensed', 'returned', 'damaged']),
    readPoint: z.object({ id: z.string() }),
    bizLocation: z.object({ id: z.string() }).optional(),
    epcList: z.array(z.string()).optional(),
    quantityList: z.array(z.object({ epcClass: z.string(), quantity: z.number() })).optional(),
    sensorElementList: z.array(z.record(z.string(), z.unknown())).optional(),
    'rxtrace:deliveryId': z.string(),
    'rxtrace:custodySeq': z.number().int(),
    'rxtrace:custodyHash': z.string().describe('The custody event’s hash (docs/api.md, Chain of custody)'),
  })
  .openapi('EpcisObjectEvent')

const context = z.array(z.union([z.string(), z.record(z.string(), z.string())]))

const EpcisDocument = z
  .object({
    '@context': context,
    type: z.literal('EPCISDocument'),
    schemaVersion: z.literal('2.0'),
    creationDate: z.string(),
    epcisBody: z.object({ eventList: z.array(ObjectEvent) }),
  })
  .openapi('EpcisDocument')

const EpcisQueryDocument = z
  .object({
    '@context': context,
    type: z.literal('EPCISQueryDocument'),
    schemaVersion: z.literal('2.0'),
    creationDate: z.string(),
    'rxtrace:nextCursor': z.string().nullable().describe('Pass as `cursor` for the next page; null on the last'),
    epcisBody: z.object({
      queryResults: z.object({ queryName: z.literal('SimpleEventQuery'), resultsBody: z.object({ eventList: z.array(ObjectEvent) }) }),
    }),
  })
  .openapi('EpcisQueryDocument')

const instant = (what: string) =>
  z.iso
    .datetime({ offset: true })
    .optional()
    .transform((t) => (t === undefined ? undefined : new Date(t).toISOString()))
    .describe(what)

const EventsQuery = z.object({
  from: instant('Events recorded at or after this instant (RFC 3339; EPCIS recordTime)'),
  to: instant('Events recorded before this instant (RFC 3339)'),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(1_000)
    .describe('Events per page, 1–10,000: a repository pulls large pages, which are streamed'),
  cursor: z.string().max(300).optional().describe('`rxtrace:nextCursor` of the previous page'),
})

/** `GET /v1/deliveries/{id}/epcis` and `GET /v1/epcis/events` (docs/interop.md, EPCIS). */
export function epcisRoutes(epcis: EpcisService) {
  const app = new OpenAPIHono<AppEnv>()

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/deliveries/{id}/epcis',
      operationId: 'getDeliveryEpcis',
      tags: ['Interoperability'],
      summary: 'The delivery’s custody chain and temperature evidence as a GS1 EPCIS 2.0 document',
      description:
        'One ObjectEvent per custody handoff (pickup, handoff, deliver, return) with its CBV business step and disposition, the items as GTIN classes or SGTINs, and for a cold chain a sensor element per interval between handoffs. JSON-LD.',
      request: { params: idParam('dl') },
      responses: { 200: { description: 'The EPCISDocument', content: { [LD_JSON]: { schema: EpcisDocument } } } },
    }),
    async (c) => {
      const document = await epcis.document(c.get('principal'), c.req.valid('param').id)
      return c.body(JSON.stringify(document), 200, { 'content-type': LD_JSON })
    },
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/epcis/events',
      operationId: 'listEpcisEvents',
      tags: ['Interoperability'],
      summary: 'Every EPCIS event of your deliveries, as EPCISQueryDocument pages',
      description:
        'In record-time order, paged by cursor: the next page’s cursor is `rxtrace:nextCursor` and the `Link` header (`rel="next"`). The page is streamed.',
      request: { query: EventsQuery },
      responses: { 200: { description: 'A page of events', content: { [LD_JSON]: { schema: EpcisQueryDocument } } } },
    }),
    async (c) => {
      const query = c.req.valid('query')
      const page = await epcis.page(c.get('principal'), query)
      const headers: Record<string, string> = { 'content-type': LD_JSON }
      if (page.nextCursor) {
        const next = new URL(c.req.url)
        next.searchParams.set('cursor', page.nextCursor)
        headers.link = `<${next.pathname}${next.search}>; rel="next"`
      }
      return c.body(streamOf(page.chunks), 200, headers)
    },
  )
  return app
}

/** A pull stream: the next batch is read only when the client has taken the last one (backpressure). */
function streamOf(chunks: AsyncIterable<string>): ReadableStream<Uint8Array> {
  const iterator = chunks[Symbol.asyncIterator]()
  const encoder = new TextEncoder()
  return new ReadableStream({
    async pull(controller) {
      const { value, done } = await iterator.next()
      if (done) controller.close()
      else controller.enqueue(encoder.encode(value))
    },
    async cancel() {
      await iterator.return?.()
    },
  })
}
