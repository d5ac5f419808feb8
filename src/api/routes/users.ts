import { OpenAPIHono } from '@hono/zod-openapi'
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../../auth/passwords.js'
import { roleNames } from '../../auth/roles.js'
import type { UserAdmin } from '../../auth/user-admin.js'
import type { AppEnv } from '../env.js'
import { idParam, json, problem, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'

const role = z
  .enum(roleNames)
  .describe('pharmacist and technician belong to a pharmacy; dispatcher, driver and fleet_admin to a fleet; admin to neither')
const password = z.string().min(MIN_PASSWORD_LENGTH).max(MAX_PASSWORD_LENGTH)

const NewUser = z
  .strictObject({
    email: z.email().max(254),
    name: z.string().min(1).max(200),
    role,
    pharmacy_id: z.string().optional(),
    fleet_id: z.string().optional(),
    driver_id: z.string().optional().describe('Required for role driver: the dr_… driver whose deliveries this user sees'),
    password: password
      .optional()
      .describe(
        'At least 12 characters; not a common or breached password, nor one containing the service’s name or the email’s name. Leave it out to get a single-use setup_url (72 h) for the user instead',
      ),
  })
  .openapi('NewUser')

const User = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string(),
    role: z.string(),
    pharmacy_id: z.string().nullable(),
    fleet_id: z.string().nullable(),
    driver_id: z.string().nullable(),
    disabled: z.boolean(),
    created_at: z.string(),
  })
  .openapi('User')

const UserPatch = z
  .strictObject({
    name: z.string().min(1).max(200).optional(),
    role: role
      .optional()
      .describe(
        'Within the same kind of tenant. A new role ends the user’s sessions and revokes their refresh and access tokens, as disabling does',
      ),
    driver_id: z.string().nullable().optional(),
    disabled: z
      .boolean()
      .optional()
      .describe('true ends the user’s sessions and revokes their refresh tokens; their access tokens stop working'),
  })
  .openapi('UserPatch')

/** People who sign in. Users are never deleted (custody events name them): they are disabled. */
export function userRoutes(admin: UserAdmin) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('clients:write', {
      method: 'post',
      path: '/v1/users',
      operationId: 'createUser',
      tags: ['Users'],
      summary: 'Create a user',
      description:
        'No token creates a user more powerful than itself: every scope of the role must be the caller’s, and a pharmacy- or fleet-restricted caller creates users of its own tenant only.',
      request: jsonBody(NewUser),
      responses: {
        201: json(
          User.extend({ setup_url: z.string().optional().describe('Single-use, 72 h; only when no password was given') }),
          'The user',
        ),
        409: problem('The email is taken, or a request with this Idempotency-Key is still running'),
      },
    }),
    async (c) => {
      c.header('Cache-Control', 'no-store')
      return c.json(await admin.create(c.get('principal'), c.req.valid('json')), 201)
    },
  )

  app.openapi(
    v1Route('clients:write', {
      method: 'get',
      path: '/v1/users',
      operationId: 'listUsers',
      tags: ['Users'],
      summary: 'List users',
      request: { query: pageQuery },
      responses: { 200: json(pageOf(User), 'A page of users') },
    }),
    async (c) => c.json(await admin.list(c.get('principal'), c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('clients:write', {
      method: 'get',
      path: '/v1/users/{id}',
      operationId: 'getUser',
      tags: ['Users'],
      summary: 'Read a user',
      request: { params: idParam('us') },
      responses: { 200: json(User, 'The user') },
    }),
    async (c) => c.json(await admin.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('clients:write', {
      method: 'patch',
      path: '/v1/users/{id}',
      operationId: 'updateUser',
      tags: ['Users'],
      summary: 'Rename, change the role of, disable or re-enable a user',
      request: { params: idParam('us'), ...jsonBody(UserPatch) },
      responses: { 200: json(User, 'The user') },
    }),
    async (c) => c.json(await admin.update(c.get('principal'), c.req.valid('param').id, c.req.valid('json')), 200),
  )
  return app
}
