import { ClientRegistry } from '../auth/clients.js'
import type { Command, CliContext } from './command.js'
import { durationSeconds, scopeList, UsageError } from './usage.js'

// The same bounds as POST /v1/oauth/clients/{id}/rotate-secret.
const DEFAULT_OVERLAP = '24h'
const MAX_OVERLAP_S = 30 * 86_400
const authMethods = ['client_secret_basic', 'client_secret_post'] as const

async function registry(ctx: CliContext) {
  const { db } = await ctx.store()
  return { db, clients: new ClientRegistry(db, ctx.clock) }
}

export const createClient: Command = {
  name: 'clients create',
  synopsis:
    'clients create --name NAME [--scope "a b"] [--pharmacy ph_…|--fleet fl_…] [--auth-method client_secret_basic|client_secret_post]',
  summary: 'Register an OAuth client (client_credentials); prints it with its client_secret, shown once',
  help: [
    '--name NAME          client_name (RFC 7591), 1–200 characters',
    '--scope "a b"        space-separated scopes; default: the read-only scopes of its tenant kind',
    '                     (a --fleet client may never hold cold-chain:disposition)',
    '--pharmacy ph_…      restrict the client to one pharmacy (its tokens carry pharmacy_id)',
    '--fleet fl_…         restrict the client to one fleet (its tokens carry fleet_id)',
    '--auth-method M      client_secret_basic (default) or client_secret_post',
  ],
  options: {
    name: { type: 'string' },
    scope: { type: 'string' },
    pharmacy: { type: 'string' },
    fleet: { type: 'string' },
    'auth-method': { type: 'string' },
  },
  positionals: [],
  async run(ctx, values) {
    const name = values.name as string | undefined
    if (name === undefined) throw new UsageError('--name is required')
    if (name.trim() === '' || name.length > 200) throw new UsageError('--name must be 1–200 characters')
    const scope = values.scope === undefined ? undefined : scopeList(values.scope as string)
    const pharmacyId = values.pharmacy as string | undefined
    const fleetId = values.fleet as string | undefined
    if (pharmacyId && fleetId) throw new UsageError('restrict a client to a pharmacy or a fleet, not both')
    if (pharmacyId !== undefined && !/^ph_\w+$/.test(pharmacyId))
      throw new UsageError(`--pharmacy "${pharmacyId}" is not a pharmacy id (ph_…)`)
    if (fleetId !== undefined && !/^fl_\w+$/.test(fleetId)) throw new UsageError(`--fleet "${fleetId}" is not a fleet id (fl_…)`)
    if (fleetId && scope?.split(' ').includes('cold-chain:disposition'))
      throw new UsageError('--scope: a fleet-restricted client may not hold cold-chain:disposition')
    const method = (values['auth-method'] as string | undefined) ?? 'client_secret_basic'
    if (!(authMethods as readonly string[]).includes(method)) throw new UsageError(`--auth-method must be ${authMethods.join(' or ')}`)

    const { db, clients } = await registry(ctx)
    if (pharmacyId && !(await db.selectFrom('pharmacies').select('id').where('id', '=', pharmacyId).executeTakeFirst())) {
      throw new UsageError(`--pharmacy ${pharmacyId}: no such pharmacy`)
    }
    if (fleetId && !(await db.selectFrom('fleets').select('id').where('id', '=', fleetId).executeTakeFirst())) {
      throw new UsageError(`--fleet ${fleetId}: no such fleet`)
    }
    const created = await clients.create({
      client_name: name,
      scope,
      token_endpoint_auth_method: method as (typeof authMethods)[number],
      pharmacy_id: pharmacyId ?? null,
      fleet_id: fleetId ?? null,
    })
    ctx.note('Save client_secret now: it is stored hashed and cannot be shown again.')
    return created
  },
}

export const rotateClientSecret: Command = {
  name: 'clients rotate-secret',
  synopsis: 'clients rotate-secret <client_id> [--overlap 24h]',
  summary: 'Give a client a new secret; the old one keeps working for the overlap window',
  help: ['--overlap DURATION   how long the old secret stays valid, e.g. 0s, 1h, 24h (default), at most 30d'],
  options: { overlap: { type: 'string' } },
  positionals: ['client_id'],
  async run(ctx, values, [clientId]) {
    const overlapS = durationSeconds('overlap', (values.overlap as string | undefined) ?? DEFAULT_OVERLAP, MAX_OVERLAP_S)
    const { clients } = await registry(ctx)
    if ((await clients.list()).some((c) => c.client_id === clientId && c.revoked_at !== null)) {
      throw new UsageError(`client ${clientId} is revoked; create a new one`)
    }
    const rotated = await clients.rotateSecret(clientId!, overlapS)
    if (!rotated) throw new UsageError(`no client ${clientId}`)
    ctx.note(`Save client_secret now; the previous secret stops working at ${rotated.previous_secret_expires_at}.`)
    return rotated
  },
}

export const showClient: Command = {
  name: 'clients show',
  synopsis: 'clients show <client_id>',
  summary: 'Print a client (never its secret)',
  help: [],
  options: {},
  positionals: ['client_id'],
  async run(ctx, _values, [clientId]) {
    const { clients } = await registry(ctx)
    const client = await clients.find(clientId!)
    if (!client) throw new UsageError(`no client ${clientId}`)
    return client
  },
}

export const listClients: Command = {
  name: 'clients list',
  synopsis: 'clients list',
  summary: 'Print every client, oldest first, with revoked_at (null while usable); never a secret',
  help: [],
  options: {},
  positionals: [],
  async run(ctx) {
    const { clients } = await registry(ctx)
    return { data: await clients.list() }
  },
}

export const revokeClient: Command = {
  name: 'clients revoke',
  synopsis: 'clients revoke <client_id>',
  summary: 'Revoke a client: its secrets stop working at once; tokens it holds expire within TOKEN_TTL_S',
  help: ["Revoking twice is harmless and answers the first revocation's time. A revoked client cannot be reinstated; create a new one."],
  options: {},
  positionals: ['client_id'],
  async run(ctx, _values, [clientId]) {
    const { clients } = await registry(ctx)
    const revoked = await clients.revoke(clientId!)
    if (!revoked) throw new UsageError(`no client ${clientId}`)
    ctx.note(`Client ${clientId} can no longer get tokens; tokens already issued expire within ${ctx.config.TOKEN_TTL_S} s.`)
    return { client_id: clientId, ...revoked }
  },
}
