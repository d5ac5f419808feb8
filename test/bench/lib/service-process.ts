import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url))

// Start-up runs migrations and creates a signing key; on a busy 2-core machine that takes seconds.
const READY_TIMEOUT_MS = 60_000
const TAIL_BYTES = 16_384

/** A port nobody is listening on right now (the kernel picks it; we release it for the child). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/** The admin client every benchmark pins (ADMIN_CLIENT_ID / ADMIN_CLIENT_SECRET) to get its tokens. */
export const BENCH_ADMIN = { id: 'cl_bench_admin', secret: 'bench-admin-secret-not-for-production' }

const UNLIMITED = '1000000'
// Settings of the caller's shell that would move the service off its embedded defaults.
const NOT_INHERITED = ['DATABASE_URL', 'QUESTDB_CONFIG', 'MQTT_URL', 'ISSUER', 'PASSWORD_SCRYPT_LOG2_N']

/**
 * The environment every benchmark starts the service with: embedded defaults (nothing inherited
 * that scales it out), its own DATA_DIR and HTTP port, no MQTT over WebSocket, warn-level logs (a
 * JSON line per request costs throughput), readings judged at once (no reorder window), the bench
 * admin client, and no throttle: one address and one client make all the load, and the throttles
 * are not what is measured. `extra` adds or overrides (MQTT_PORT, DATABASE_URL, …).
 */
export function benchServiceEnv(dataDir: string, httpPort: number, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of NOT_INHERITED) delete env[name]
  return {
    ...env,
    DATA_DIR: dataDir,
    PORT: String(httpPort),
    HOST: '127.0.0.1',
    MQTT_WS_PORT: 'off',
    LOG_LEVEL: 'warn',
    REORDER_WINDOW_S: '0',
    ADMIN_CLIENT_ID: BENCH_ADMIN.id,
    ADMIN_CLIENT_SECRET: BENCH_ADMIN.secret,
    RATE_LIMIT_RPS: UNLIMITED,
    RATE_LIMIT_BURST: UNLIMITED,
    RATE_LIMIT_TENANT_RPS: UNLIMITED,
    RATE_LIMIT_TENANT_BURST: UNLIMITED,
    OAUTH_ADDRESS_RPS: UNLIMITED,
    OAUTH_ADDRESS_BURST: UNLIMITED,
    OAUTH_CLIENT_RPS: UNLIMITED,
    OAUTH_CLIENT_BURST: UNLIMITED,
    ...extra,
  }
}

export type ServiceProcess = {
  baseUrl: string
  child: ChildProcess
  /** The last few KiB the service wrote, for error reports. */
  output(): string
  /** CPU time (user + system) the service process has used so far, or null off Linux. */
  cpuMs(): number | null
  /** SIGTERM, then the exit code (0 = graceful stop completed). */
  stop(): Promise<number | null>
}

// /proc/<pid>/stat fields 14 and 15 (utime, stime) count clock ticks; USER_HZ is 100 on Linux.
const TICK_MS = 10

/** CPU time of a process from /proc: unlike wall time, not inflated when other work shares the machine. */
function processCpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ') // the command name may contain spaces
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS
  } catch {
    return null
  }
}

/**
 * The node flags of `npm start` (`[exec] node <flags> --import tsx src/main.ts` in package.json), so a benchmark runs
 * the service as it is started in production (today: the young-generation size).
 */
function npmStartFlags(): string[] {
  const { scripts } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: { start: string } }
  // `tsx [--flags] src/main.ts` or `[exec] node [--flags] --import tsx src/main.ts`.
  const match = /^(?:exec )?(?:tsx((?: --\S+)*)|node((?: --\S+)*) --import tsx) src\/main\.ts$/.exec(scripts.start)
  if (!match)
    throw new Error(
      `package.json start script is not "tsx [--flags] src/main.ts" or "node [--flags] --import tsx src/main.ts": ${scripts.start}`,
    )
  return (match[1] ?? match[2]!).split(' ').filter(Boolean)
}

/**
 * Runs `node <npm start's flags> [nodeArgs] --import tsx src/main.ts` as a separate process,
 * exactly as `npm start` would (minus npm), and resolves once GET /readyz answers 200.
 */
export async function startServiceProcess({
  env,
  port,
  nodeArgs = [],
}: {
  env: NodeJS.ProcessEnv
  port: number
  nodeArgs?: string[]
}): Promise<ServiceProcess> {
  // BENCH_SERVICE_NODE_ARGS: more node flags for the service (e.g. --trace-gc), a debugging aid like BENCH_SERVICE_STDERR.
  const extraArgs = process.env.BENCH_SERVICE_NODE_ARGS?.split(' ').filter(Boolean) ?? []
  const child = spawn(process.execPath, [...npmStartFlags(), ...nodeArgs, ...extraArgs, '--import', 'tsx', 'src/main.ts'], {
    cwd: repoRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let tail = ''
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-TAIL_BYTES)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  // Debugging aid: the service's own log lines on our stderr as they come.
  if (process.env.BENCH_SERVICE_STDERR) {
    const echo = (chunk: Buffer) => process.stderr.write(chunk)
    child.stdout!.on('data', echo) // the log (pino writes to stdout)
    child.stderr!.on('data', echo)
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))

  const baseUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + READY_TIMEOUT_MS
  let ready = false
  while (!ready) {
    if (child.exitCode !== null) throw new Error(`the service exited with code ${child.exitCode} before it was ready:\n${tail}`)
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`the service was not ready within ${READY_TIMEOUT_MS / 1_000} s:\n${tail}`)
    }
    ready = await fetch(`${baseUrl}/readyz`).then(
      (r) => r.ok,
      () => false,
    )
    if (!ready) await new Promise((r) => setTimeout(r, 100))
  }
  return {
    baseUrl,
    child,
    output: () => tail,
    cpuMs: () => processCpuMs(child.pid!),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM')
      return exited
    },
  }
}
