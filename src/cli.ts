/**
 * Operator CLI: `npm run cli -- <command>`. Works on the entity store directly (DATA_DIR or
 * DATABASE_URL, as the service), so it needs no running service and no token.
 * Exit codes: 0 done, 1 failed (store unreachable, bad environment), 2 bad arguments.
 */
import { systemClock } from './clock.js'
import { join, resolve as resolvePath } from 'node:path'
import { ConfigError, loadConfig, type Config } from './config.js'
import { existsSync } from 'node:fs'
import { createClient, listClients, revokeClient, rotateClientSecret, showClient } from './cli/clients.js'
import type { CliContext, Command } from './cli/command.js'
import { rewrapKeys, rotateKeys } from './cli/keys.js'
import { initStore } from './cli/store.js'
import { createUser, disableUser, listUsers, showUser } from './cli/users.js'
import { parse, UsageError } from './cli/usage.js'
import { entityStoreOptions, openEntityStore, type EntityStore } from './store/database.js'
import { sealClearSecrets } from './store/sealed-secrets.js'
import type { SecretBox } from './store/secret-box.js'
import { loadSecretsKeys } from './store/secrets-key.js'
import { naming, StartupError } from './startup-error.js'

const commands: Command[] = [
  createClient,
  listClients,
  showClient,
  rotateClientSecret,
  revokeClient,
  rotateKeys,
  rewrapKeys,
  initStore,
  createUser,
  listUsers,
  showUser,
  disableUser,
]

// The service's SQLite entity store inside DATA_DIR (src/store/database.ts).
const SQLITE_FILE = 'rxtrace.db'

const EXIT_FAILED = 1
const EXIT_USAGE = 2

function overview(): string {
  return [
    'Usage: npm run cli -- <command> [options]',
    '',
    'Commands:',
    ...commands.flatMap((c) => [`  ${c.synopsis}`, `      ${c.summary}`]),
    '',
    'Each command prints one JSON document on stdout; `<command> --help` explains its options.',
    "The store is the service's: DATA_DIR (SQLite, default ./data) or DATABASE_URL (PostgreSQL).",
  ].join('\n')
}

function commandHelp(command: Command): string {
  return [
    `Usage: npm run cli -- ${command.synopsis}`,
    '',
    command.summary + '.',
    ...(command.help.length ? ['', ...command.help.map((l) => `  ${l}`)] : []),
  ].join('\n')
}

/** Finds the command named by the first words of argv; the rest are its arguments. */
function resolve(argv: string[]): { command: Command; rest: string[] } | null {
  const words = argv.slice(0, 2).join(' ')
  const command = commands.find((c) => c.name === words)
  if (command) return { command, rest: argv.slice(2) }
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') return null
  const group = commands.filter((c) => c.name.startsWith(`${argv[0]} `))
  if (group.length === 0)
    throw new UsageError(`unknown command "${argv[0]}" (commands: ${[...new Set(commands.map((c) => c.name.split(' ')[0]))].join(', ')})`)
  const known = group.map((c) => c.name.split(' ')[1]).join(', ')
  if (argv[1] === undefined || argv[1].startsWith('-')) throw new UsageError(`${argv[0]}: name a subcommand (${known})`)
  throw new UsageError(`${argv[0]}: unknown subcommand "${argv[1]}" (${known})`)
}

async function main(argv: string[]): Promise<number> {
  if (argv.length === 0) throw new UsageError('name a command; see --help')
  const found = resolve(argv)
  if (!found) {
    process.stdout.write(overview() + '\n')
    return 0
  }
  const { command, rest } = found
  const args = parse(rest, command.options, command.positionals)
  if (args.help) {
    process.stdout.write(commandHelp(command) + '\n')
    return 0
  }
  const config = loadConfig()
  let opened: Promise<Opened> | null = null
  const note = (line: string) => process.stderr.write(`${line}\n`)
  const open = () => (opened ??= openStore(config, command.createsStore === true, note))
  const ctx: CliContext = {
    config,
    clock: systemClock,
    store: async () => (await open()).store,
    secrets: async () => (await open()).secrets,
    note,
  }
  try {
    const result = await command.run(ctx, args.values, args.positionals)
    process.stdout.write(JSON.stringify(result, null, 2) + '\n')
    return 0
  } finally {
    await (opened as Promise<Opened> | null)?.then(
      ({ store }) => store.close(),
      () => {},
    )
  }
}

type Opened = { store: EntityStore; secrets: SecretBox }

/**
 * The service's store. A SQLite store must exist already (unless the command creates it): a
 * mistyped DATA_DIR would otherwise get a new, empty store and the command would act on it.
 */
async function openStore(config: Config, mayCreate: boolean, note: (line: string) => void): Promise<Opened> {
  const store = await openEntityStoreOnly(config, mayCreate)
  try {
    // As the service does at start-up: the same key, or the same one-line refusal.
    const { box, origin, generated } = loadSecretsKeys(config)
    if (generated)
      note(`Generated a key-encryption key for the stored secrets in ${generated}; keep a copy apart from the database backups.`)
    await sealClearSecrets(store.db, box, origin)
    return { store, secrets: box }
  } catch (error) {
    await store.close()
    throw error
  }
}

async function openEntityStoreOnly(config: Config, mayCreate: boolean): Promise<EntityStore> {
  if (config.DATABASE_URL)
    return naming('DATABASE_URL', config.DATABASE_URL, 'PostgreSQL', () => openEntityStore(entityStoreOptions(config)))
  const file = join(config.DATA_DIR, SQLITE_FILE)
  if (!mayCreate && !existsSync(file)) {
    throw new StartupError(
      `DATA_DIR=${config.DATA_DIR}: no rxtrace store there (${resolvePath(file)} does not exist); set DATA_DIR to the service's, or create a store with \`npm run cli -- store init\``,
    )
  }
  return openEntityStore(entityStoreOptions(config))
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`rxtrace: ${error.message}\n`)
      process.exitCode = EXIT_USAGE
    } else if (error instanceof ConfigError || error instanceof StartupError) {
      process.stderr.write(`rxtrace: ${error.message}\n`)
      process.exitCode = EXIT_FAILED
    } else {
      process.stderr.write(`rxtrace: ${(error as Error).message}\n`)
      process.exitCode = EXIT_FAILED
    }
  },
)
