import { ConfigError, issuerOf, loadConfig, type Config } from './config.js'
import { StartupError } from './listen.js'
import { holdDataDir } from './store/data-dir.js'
import { createLogger, logFormatFor } from './logger.js'
import type { Service } from './service.js'

// docs/operations.md, Shutdown: a graceful stop completes within 10 s or the process exits anyway.
const SHUTDOWN_DEADLINE_MS = 10_000
// Named by a start that fails for a full disk: where space must be freed (SQLite stores only).
let dataDir: string | undefined

async function main(): Promise<void> {
  // Whatever this process creates is its user's only. The data directory and store files get
  // 0700/0600 explicitly as well (store/private-files.ts); this catches anything written later.
  process.umask(0o077)
  const config = loadConfig()
  dataDir = config.DATABASE_URL ? undefined : config.DATA_DIR
  // The SQLite stores in DATA_DIR are this process's alone; with DATABASE_URL nothing lives there.
  const dataDirLock = config.DATABASE_URL ? null : holdDataDir(config.DATA_DIR)
  const logger = createLogger(config.LOG_LEVEL, logFormatFor(config.LOG_FORMAT, process.stdout.isTTY === true))
  // Loaded after the configuration is known good, so a bad variable is reported at once.
  const { buildService } = await import('./service.js')
  const service = await buildService(config, { logger })
  const ports = await service.start()
  // Handlers go in once the service is up; a signal during start-up ends the process at once.
  // A second signal while stopping is ignored: `npm start` relays the terminal's Ctrl-C to a
  // process that already got it from its process group, and the deadline bounds the stop anyway.
  let stopping = false
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return
      stopping = true
      void shutdown(service, signal)
    })
  }
  dataDirLock?.describe(ports)
  service.logger.info({ ...ports }, 'rxtrace started')
  // The admin client is created only once every listener is bound (service.start()), so a start
  // that fails never leaves behind an admin whose secret nobody saw.
  if (service.newAdmin) printAdmin(service.newAdmin, config)
}

/** The banner goes to stderr: stdout carries the log records (JSON a line when not a terminal). */
function printAdmin(admin: { clientId: string; secret: string }, config: Config): void {
  // Printed once: the secret is stored hashed and cannot be shown again.
  process.stderr.write(
    [
      '',
      'An admin client was created. Save its secret now; it is not shown again.',
      `  client_id:     ${admin.clientId}`,
      `  client_secret: ${admin.secret}`,
      'Get a token:',
      `  curl -s -u '${admin.clientId}:${admin.secret}' -d grant_type=client_credentials ${issuerOf(config)}/oauth/token`,
      '',
    ].join('\n') + '\n',
  )
}

async function shutdown(service: Service, signal: string): Promise<void> {
  service.logger.info({ signal }, 'stopping')
  const deadline = setTimeout(() => {
    service.logger.error(`shutdown took longer than ${SHUTDOWN_DEADLINE_MS / 1000} s; exiting`)
    process.exit(1)
  }, SHUTDOWN_DEADLINE_MS)
  deadline.unref()
  try {
    await service.stop()
  } catch (err) {
    service.logger.error({ err }, 'stopping failed')
    process.exit(1)
  }
  service.logger.info('stopped')
  process.exit(0)
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof StartupError) {
    process.stderr.write(`rxtrace: ${error.message}\n`)
  } else if (dataDir !== undefined && isDiskFull(error)) {
    // The SQLite stores could not make the little they need to open (their shared-memory files).
    process.stderr.write(
      `rxtrace: failed to start: DATA_DIR=${dataDir}: ${(error as Error).message} (${(error as { code: string }).code}): free some space there and start again\n`,
    )
  } else {
    process.stderr.write(`rxtrace: failed to start: ${(error as Error).message}\n`)
  }
  process.exit(1)
})

function isDiskFull(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return code === 'SQLITE_FULL' || code === 'SQLITE_IOERR_SHMSIZE' || code === 'ENOSPC'
}
