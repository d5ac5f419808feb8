import { AuditLog } from '../auth/audit-log.js'
import { KeyRing } from '../auth/keys.js'
import { DEFAULT_SCRYPT, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../auth/passwords.js'
import { createPeople } from '../auth/people.js'
import { isRole, roleNames } from '../auth/roles.js'
import { TokenService } from '../auth/tokens.js'
import { issuerOf } from '../config.js'
import { AppError } from '../errors.js'
import type { CliContext, Command } from './command.js'
import { UsageError } from './usage.js'

/** The same user management as /v1/users, as the unrestricted operator. */
async function people(ctx: CliContext) {
  const { db, dialect } = await ctx.store()
  const keys = new KeyRing(db, await ctx.secrets(), ctx.clock, ctx.config.TOKEN_TTL_S) // only to record revocations; signs nothing
  const tokens = new TokenService(db, keys, ctx.clock, issuerOf(ctx.config), ctx.config.TOKEN_TTL_S)
  const audit = new AuditLog(db, dialect, ctx.clock)
  return createPeople({
    db,
    dialect,
    clock: ctx.clock,
    tokens,
    audit,
    scrypt: { ...DEFAULT_SCRYPT, log2N: ctx.config.PASSWORD_SCRYPT_LOG2_N },
  }).admin
}

/** API validation failures read as one usage line. */
async function asUsage<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof AppError) {
      const errors = (error.extra.errors as { pointer: string; message: string }[] | undefined) ?? []
      throw new UsageError(
        errors.length ? errors.map((e) => `${e.pointer.replace(/^\//, '--').replace('_id', '')}: ${e.message}`).join('; ') : error.message,
      )
    }
    throw error
  }
}

export const createUser: Command = {
  name: 'users create',
  synopsis: 'users create --email E --name N --role ROLE [--pharmacy ph_…|--fleet fl_…] [--driver dr_…] [--password-stdin]',
  summary: 'Create a person who signs in; prints the user and, with no password, a single-use setup_url (72 h)',
  help: [
    `--role ROLE          ${roleNames.join(', ')}`,
    '--pharmacy ph_…      the pharmacy of a pharmacist or technician',
    '--fleet fl_…         the fleet of a dispatcher, driver or fleet_admin',
    '--driver dr_…        for a driver: the driver whose deliveries the user sees',
    `--password-stdin     read the password (${MIN_PASSWORD_LENGTH}–${MAX_PASSWORD_LENGTH} characters) from stdin rather than sending a setup link`,
  ],
  options: {
    email: { type: 'string' },
    name: { type: 'string' },
    role: { type: 'string' },
    pharmacy: { type: 'string' },
    fleet: { type: 'string' },
    driver: { type: 'string' },
    'password-stdin': { type: 'boolean' },
  },
  positionals: [],
  async run(ctx, values) {
    const email = values.email as string | undefined
    const name = values.name as string | undefined
    const role = values.role as string | undefined
    if (!email || !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) throw new UsageError('--email must be an email address')
    if (!name || name.length > 200) throw new UsageError('--name must be 1–200 characters')
    if (!role || !isRole(role)) throw new UsageError(`--role must be one of ${roleNames.join(', ')}`)
    let password: string | undefined
    if (values['password-stdin']) {
      const chunks: Buffer[] = []
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
      password = Buffer.concat(chunks)
        .toString('utf8')
        .replace(/\r?\n$/, '')
      if (password.length < MIN_PASSWORD_LENGTH || password.length > MAX_PASSWORD_LENGTH)
        throw new UsageError(`the password must be ${MIN_PASSWORD_LENGTH}–${MAX_PASSWORD_LENGTH} characters`)
    }
    const admin = await people(ctx)
    const user = await asUsage(() =>
      admin.create(null, {
        email,
        name,
        role,
        pharmacy_id: values.pharmacy as string | undefined,
        fleet_id: values.fleet as string | undefined,
        driver_id: values.driver as string | undefined,
        password,
      }),
    )
    if (user.setup_url) ctx.note('Send setup_url to the user: it works once, for 72 hours.')
    return user
  },
}

export const listUsers: Command = {
  name: 'users list',
  synopsis: 'users list [--limit 50] [--cursor C]',
  summary: 'List users, oldest first; next_cursor pages on',
  help: ['--limit N   1–100 (default 50)', '--cursor C  next_cursor of the previous page'],
  options: { limit: { type: 'string' }, cursor: { type: 'string' } },
  positionals: [],
  async run(ctx, values) {
    const limit = Number(values.limit ?? 50)
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new UsageError('--limit must be 1–100')
    return asUsage(async () => (await people(ctx)).list(null, { limit, cursor: values.cursor as string | undefined }))
  },
}

export const showUser: Command = {
  name: 'users show',
  synopsis: 'users show <user_id>',
  summary: 'Print a user (never a password)',
  help: [],
  options: {},
  positionals: ['user_id'],
  async run(ctx, _values, [userId]) {
    return asUsage(async () => (await people(ctx)).get(null, userId!)).catch((error) => {
      throw error instanceof UsageError ? new UsageError(`no user ${userId}`) : error
    })
  },
}

export const disableUser: Command = {
  name: 'users disable',
  synopsis: 'users disable <user_id>',
  summary: 'Disable a user: their sessions end, their refresh tokens are revoked, their access tokens stop working',
  help: [],
  options: {},
  positionals: ['user_id'],
  async run(ctx, _values, [userId]) {
    const admin = await people(ctx)
    await asUsage(() => admin.get(null, userId!)).catch(() => {
      throw new UsageError(`no user ${userId}`)
    })
    return admin.update(null, userId!, { disabled: true })
  },
}
