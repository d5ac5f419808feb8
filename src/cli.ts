/**
 * Operator CLI: `npm run cli -- <command>`. Works on the entity store directly (DATA_DIR or
 * DATABASE_URL, as the service), so it needs no running service and no token.
 * Exit codes: 0 done, 1 failed (store unreachable, bad environment), 2 bad arguments.
 */
import { systemClock } from './clock.js'
import { ConfigError, loadConfig } from './config.js'
import { createClient, rotateClientSecret, showClient } from './cli/clients.js'
import type { CliContext, Command } from './cli/command.js'
import { rotateKeys } from './cli/keys.js'
import { createUser, disableUser, listUsers, showUser } from './cli/users.js'
import { parse, UsageError } from './cli/usage.js'
import { entityStoreOptions, openEntityStore, type EntityStore } from './store/database.js'

const commands: Command[] = [createClient, rotateClientSecret, showClient, rotateKeys, createUser, listUsers, showUser, disableUser]

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
    'The store is the service\'s: DATA_DIR (SQLite, default ./data) or DATABASE_URL (PostgreSQL).',
  ].join('\n')
}

function commandHelp(command: Command): string {
  return [`Usage: npm run cli -- ${command.synopsis}`, '', command.summary + '.', ...(command.help.length ? ['', ...command.help.map((l) => `  ${l}`)] : [])].join('\n')
}

/** Finds the command named by the first words of argv; the rest are its arguments. */
function resolve(argv: string[]): { command: Command; rest: string[] } | null {
  const words = argv.slice(0, 2).join(' ')
  const command = commands.find((c) => c.name === words)
  if (command) return { command, rest: argv.slice(2) }
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') return null
  const group = commands.filter((c) => c.name.startsWith(`${argv[0]} `))
  if (group.length === 0) throw new UsageError(`unknown command "${argv[0]}" (commands: ${[...new Set(commands.map((c) => c.name.split(' ')[0]))].join(', ')})`)
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
  let store: EntityStore | null = null
  const ctx: CliContext = {
    config,
    clock: systemClock,
    store: async () => (store ??= await openEntityStore(entityStoreOptions(config))),
    note: (line) => process.stderr.write(`${line}\n`),
  }
  try {
    const result = await command.run(ctx, args.values, args.positionals)
    process.stdout.write(JSON.stringify(result, null, 2) + '\n')
    return 0
  } finally {
    await (store as EntityStore | null)?.close()
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`rxtrace: ${error.message}\n`)
      process.exitCode = EXIT_USAGE
    } else if (error instanceof ConfigError) {
      process.stderr.write(`rxtrace: ${error.message}\n`)
      process.exitCode = EXIT_FAILED
    } else {
      process.stderr.write(`rxtrace: ${(error as Error).message}\n`)
      process.exitCode = EXIT_FAILED
    }
  },
)
