import { OpenAPIHono } from '@hono/zod-openapi'
import type { FleetService } from '../../services/fleets.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'
import { timeZoneSchema } from '../time-zone.js'

const Branding = z
  .strictObject({
    display_name: z.string().max(100).optional(),
    logo_url: z.url().optional(),
    primary_color: z
      .string()
      .regex(/^#[0-9a-fA-F]{6}$/, 'must be a hex colour like #0a7d5a')
      .optional(),
  })
  .openapi('Branding')
// A browser compares frame-ancestors origins as scheme, host and port: no path, no trailing slash.
const EmbedOrigins = z
  .array(
    z
      .string()
      .regex(
        /^https:\/\/[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?$/,
        'must be an https origin such as https://dispatch.example.com (lower case, no path)',
      ),
  )
  .max(10)
  .describe("The https origins allowed to frame the fleet's embedded dashboard (CSP frame-ancestors)")
const FleetTimeZone = timeZoneSchema.describe(
  "IANA time zone the fleet's dispatchers work in, such as America/Chicago: the embedded dashboard shows local times in it (default UTC)",
)
const AverageSpeed = z
  .number()
  .min(1)
  .max(200)
  .describe(
    'km/h over which the straight-line distance from a driver to the delivery address becomes an ETA (default 25: urban driving with stops; docs/fleet.md)',
  )
const NewFleet = z
  .strictObject({
    name: z.string().min(1).max(200),
    branding: Branding.optional(),
    embed_origins: EmbedOrigins.optional(),
    timezone: FleetTimeZone.optional(),
    average_speed_kmh: AverageSpeed.optional(),
  })
  .openapi('NewFleet')
const FleetChanges = z
  .strictObject({
    name: z.string().min(1).max(200).optional(),
    branding: Branding.optional(),
    embed_origins: EmbedOrigins.optional(),
    timezone: FleetTimeZone.optional(),
    average_speed_kmh: AverageSpeed.optional(),
  })
  .openapi('FleetChanges', {
    example: {
      branding: { display_name: 'Speedy', logo_url: 'https://speedy.example.com/logo.png', primary_color: '#0a7d5a' },
      embed_origins: ['https://dispatch.speedy.example.com'],
      timezone: 'America/Chicago',
    },
  })
const Fleet = z
  .object({
    id: z.string(),
    name: z.string(),
    branding: Branding,
    embed_origins: z.array(z.string()),
    timezone: z.string().describe('IANA time zone of the embedded dashboard’s local times'),
    average_speed_kmh: z.number().describe('km/h used for ETAs computed from drivers’ positions'),
    created_at: z.string(),
  })
  .openapi('Fleet')
const NewDriver = z
  .strictObject({
    name: z.string().min(1).max(200),
    phone: z
      .string()
      .regex(/^\+[1-9]\d{6,14}$/, 'must be E.164, e.g. +15551234567')
      .optional(),
  })
  .openapi('NewDriver')
const Driver = z
  .object({
    id: z.string(),
    fleet_id: z.string(),
    name: z.string(),
    phone: z
      .string()
      .nullable()
      .optional()
      .describe("Personal data: present only for tokens of the driver's own fleet and unrestricted clients"),
    created_at: z.string(),
  })
  .openapi('Driver')

export function fleetRoutes(fleets: FleetService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('fleet:write', {
      method: 'post',
      path: '/v1/fleets',
      operationId: 'createFleet',
      tags: ['Fleets'],
      summary: 'Register a fleet operator',
      request: jsonBody(NewFleet),
      responses: { 201: json(Fleet, 'The fleet') },
    }),
    async (c) => c.json(await fleets.create(c.get('principal'), c.req.valid('json'), answerInTransaction(c, 201)), 201),
  )

  app.openapi(
    v1Route('fleet:read', {
      method: 'get',
      path: '/v1/fleets/{id}',
      operationId: 'getFleet',
      tags: ['Fleets'],
      summary: 'Read a fleet',
      request: { params: idParam('fl') },
      responses: { 200: json(Fleet, 'The fleet') },
    }),
    async (c) => c.json(await fleets.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('fleet:read', {
      method: 'get',
      path: '/v1/fleets',
      operationId: 'listFleets',
      tags: ['Fleets'],
      summary: 'List fleets',
      request: { query: pageQuery },
      responses: { 200: json(pageOf(Fleet), 'A page of fleets') },
    }),
    async (c) => c.json(await fleets.list(c.get('principal'), c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('fleet:write', {
      method: 'patch',
      path: '/v1/fleets/{id}',
      tags: ['Fleets'],
      summary: "Change a fleet's name, branding, embed origins, time zone or average speed",
      operationId: 'updateFleet',
      description:
        'Members sent replace the stored ones (`branding` as a whole). The fleet itself or an unrestricted client; a pharmacy token is refused with 403.',
      request: { params: idParam('fl'), ...jsonBody(FleetChanges) },
      responses: { 200: json(Fleet, 'The fleet as changed') },
    }),
    async (c) => c.json(await fleets.update(c.get('principal'), c.req.valid('param').id, c.req.valid('json')), 200),
  )

  app.openapi(
    v1Route('fleet:write', {
      method: 'post',
      path: '/v1/fleets/{id}/drivers',
      operationId: 'createDriver',
      tags: ['Fleets'],
      summary: 'Add a driver to a fleet',
      description: 'Only a token of that fleet, or an unrestricted one, changes a fleet; a pharmacy token is refused with 403.',
      request: { params: idParam('fl'), ...jsonBody(NewDriver) },
      responses: { 201: json(Driver, 'The driver') },
    }),
    async (c) =>
      c.json(await fleets.addDriver(c.get('principal'), c.req.valid('param').id, c.req.valid('json'), answerInTransaction(c, 201)), 201),
  )

  app.openapi(
    v1Route('fleet:read', {
      method: 'get',
      path: '/v1/fleets/{id}/drivers',
      operationId: 'listDrivers',
      tags: ['Fleets'],
      summary: "List a fleet's drivers",
      request: { params: idParam('fl'), query: pageQuery },
      responses: { 200: json(pageOf(Driver), 'A page of drivers') },
    }),
    async (c) => c.json(await fleets.listDrivers(c.get('principal'), c.req.valid('param').id, c.req.valid('query')), 200),
  )
  return app
}
