import { ConfigError, issuerOf, loadConfig } from './config.js'
import { StartupError } from './listen.js'
import type { Service } from './service.js'

// docs/operations.md, Shutdown: a graceful stop completes within 10 s or the process exits anyway.
const SHUTDOWN_DEADLINE_MS = 10_000

async function main(): Promise<void> {
  // Whatever this process creates is its user's only. The data directory and store files get
  // 0700/0600 explicitly as well (store/private-files.ts); this catches anything written later.
  process.umask(0o077)
  const config = loadConfig()
  // Loaded after the configuration is known good, so a bad variable is reported at once.
  const { buildService } = await import('./service.js')
  const service = await buildService(config)
  const ports = await service.start()
  service.logger.info({ ...ports }, 'rxtrace started')
  if (service.newAdmin) printAdmin(service.newAdmin, issuerOf(config))
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void shutdown(service, signal))
}

function printAdmin(admin: { clientId: string; secret: string }, issuer: string): void {
  // Printed once, on the first start: the secret is stored hashed and cannot be shown again.
  process.stdout.write([
    '',
    'An admin client was created. Save its secret now; it is not shown again.',
    `  client_id:     ${admin.clientId}`,
    `  client_secret: ${admin.secret}`,
    'Get a token:',
    `  curl -s -u '${admin.clientId}:${admin.secret}' -d grant_type=client_credentials ${issuer}/oauth/token`,
    '',
  ].join('\n') + '\n')
}

async function shutdown(service: Service, signal: string): Promise<void> {
  service.logger.info({ signal }, 'stopping')
  const deadline = setTimeout(() => {
    service.logger.error('shutdown took longer than 10 s; exiting')
    process.exit(1)
  }, SHUTDOWN_DEADLINE_MS)
  deadline.unref()
  await service.stop()
  service.logger.info('stopped')
  process.exit(0)
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof StartupError) {
    process.stderr.write(`rxtrace: ${error.message}\n`)
  } else {
    process.stderr.write(`rxtrace: failed to start: ${(error as Error).message}\n`)
  }
  process.exit(1)
})
