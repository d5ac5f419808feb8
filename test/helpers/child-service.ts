import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The real service as a child process (`node --import tsx src/main.ts`), for what only a real
 * process shows: SIGKILL and SIGTERM, exit codes, start-up errors on stderr, a restart on the
 * same DATA_DIR. Tests that do not need a process use `startTestService` (in-process) instead.
 */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))

const CHILD_ADMIN = { id: 'cl_reliability_admin', secret: 'reliability-admin-secret-0123456789' }

/** How long a child may take to answer /readyz (tsx compiles on the fly: 3–5 s on an idle 2-core machine, much more on a busy one). */
const READY_TIMEOUT_MS = 45_000

/** A port that was free a moment ago: bound on port 0, then released. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, host, () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })
}

export type Exit = { code: number | null; signal: NodeJS.Signals | null }

export type ChildServiceOptions = {
  /** Extra or overriding environment (e.g. `REORDER_WINDOW_S`). */
  env?: Record<string, string>
  /** Reuse a data directory (a restart); a fresh temp dir otherwise. */
  dataDir?: string
  /** Reuse ports (a restart, so clients reconnect to the same address). */
  httpPort?: number
  mqttPort?: number
  /** Extra node flags, e.g. `--cpu-prof` (not allowed in NODE_OPTIONS). */
  nodeArgs?: string[]
  /** Up once it answers /readyz at all, 503 included (a start on a full disk); by default only at 200. */
  upWhenNotReady?: boolean
}

const running = new Set<ChildProcess>()
// A test that fails half-way must not leave services behind.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/**
 * Spawns `node --import tsx src/main.ts` with `env` (merged over the parent's PATH/HOME only); does
 * not wait. stdout and stderr go to files, not pipes: pino writes synchronously, and a pipe that
 * the busy test process drains late would stall the service on its own log lines.
 */
function spawnService(env: Record<string, string>, nodeArgs: readonly string[] = []) {
  const logDir = mkdtempSync(join(tmpdir(), 'rxtrace-log-'))
  const outFile = join(logDir, 'stdout.log')
  const errFile = join(logDir, 'stderr.log')
  const out = openSync(outFile, 'w')
  const err = openSync(errFile, 'w')
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/main.ts'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', out, err],
  })
  closeSync(out)
  closeSync(err)
  running.add(child)
  const read = (file: string) => {
    try {
      return readFileSync(file, 'utf8')
    } catch {
      return '' // the log directory is gone (disposed)
    }
  }
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      running.delete(child)
      resolve({ code, signal })
    })
  })
  let exit: Exit | null = null
  void exited.then((e) => void (exit = e))
  return {
    child,
    exited,
    logDir,
    get exit() {
      return exit
    },
    get stdout() {
      return read(outFile)
    },
    get stderr() {
      return read(errFile)
    },
  }
}

/** Runs the service with `env` until it exits by itself (start-up failures); kills it after `timeoutMs`. */
export async function runUntilExit(env: Record<string, string>, timeoutMs = 90_000): Promise<Exit & { stdout: string; stderr: string }> {
  const proc = spawnService(env)
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs)
  const exit = await proc.exited
  clearTimeout(timer)
  const result = { ...exit, stdout: proc.stdout, stderr: proc.stderr }
  rmSync(proc.logDir, { recursive: true, force: true })
  return result
}

/** The environment of a child service; defaults suit tests (quiet logs, no rate limit, pinned admin). */
export function childEnv(dataDir: string, httpPort: number, mqttPort: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    PORT: String(httpPort),
    MQTT_PORT: String(mqttPort), // 1883 belongs to the local Mosquitto
    MQTT_WS_PORT: 'off',
    LOG_LEVEL: 'warn',
    ADMIN_CLIENT_ID: CHILD_ADMIN.id,
    ADMIN_CLIENT_SECRET: CHILD_ADMIN.secret,
    RATE_LIMIT_RPS: '100000',
    RATE_LIMIT_BURST: '100000',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ...extra,
  }
}

export type Reply<T = any> = { status: number; body: T; text: string }

/**
 * Starts the service as a child and resolves once `/readyz` answers 200. `restart()` starts a
 * new process on the same DATA_DIR and ports (after the previous one has exited).
 */
export async function startChildService(options: ChildServiceOptions = {}) {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'rxtrace-child-'))
  const httpPort = options.httpPort ?? (await freePort())
  const mqttPort = options.mqttPort ?? (await freePort())
  const env = childEnv(dataDir, httpPort, mqttPort, options.env)
  const proc = spawnService(env, options.nodeArgs)
  const baseUrl = `http://127.0.0.1:${httpPort}`
  await waitReady(proc, baseUrl, options.upWhenNotReady ? [200, 503] : [200])

  async function request<T = any>(
    method: string,
    path: string,
    opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...opts.headers }
    if (opts.token) headers.authorization = `Bearer ${opts.token}`
    if (opts.body !== undefined) headers['content-type'] ??= 'application/json'
    const res = await fetch(baseUrl + path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) })
    const text = await res.text()
    let body: unknown = text
    try {
      body = text ? JSON.parse(text) : null
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: body as T, text }
  }

  const restarts: { dispose(): Promise<void> }[] = []
  const service = {
    dataDir,
    httpPort,
    mqttPort,
    baseUrl,
    env,
    mqttUrl: `mqtt://127.0.0.1:${mqttPort}`,
    pid: proc.child.pid!,
    exited: proc.exited,
    get stdout() {
      return proc.stdout
    },
    get stderr() {
      return proc.stderr
    },
    request,
    get: <T = any>(path: string, token: string) => request<T>('GET', path, { token }),
    post: <T = any>(path: string, token: string, body?: unknown, headers?: Record<string, string>) =>
      request<T>('POST', path, { token, body, headers }),
    async adminToken(): Promise<string> {
      const res = await fetch(`${baseUrl}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${CHILD_ADMIN.id}:${CHILD_ADMIN.secret}`).toString('base64')}`,
        },
        body: 'grant_type=client_credentials',
      })
      const json = (await res.json()) as { access_token?: string }
      if (!json.access_token) throw new Error(`token request failed: ${res.status} ${JSON.stringify(json)}`)
      return json.access_token
    },
    /** Sends `signal` and resolves with how the process ended. */
    async kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<Exit> {
      if (proc.exit === null) proc.child.kill(signal)
      return proc.exited
    },
    /** A new process on the same DATA_DIR and ports; the previous one must have exited. */
    async restart(env: Record<string, string> = {}, more: Pick<ChildServiceOptions, 'upWhenNotReady'> = {}) {
      if (proc.exit === null) throw new Error('restart(): the previous process is still running; kill() it first')
      const next = await startChildService({ ...options, ...more, dataDir, httpPort, mqttPort, env: { ...options.env, ...env } })
      restarts.push(next)
      return next
    },
    /**
     * Kills the process if it still runs and deletes DATA_DIR. Its restarts share that directory,
     * so they go first: deleting it under a running restart fails with ENOTEMPTY as it writes.
     */
    async dispose(): Promise<void> {
      for (const next of restarts.splice(0)) await next.dispose()
      if (proc.exit === null) await service.kill('SIGKILL')
      rmSync(dataDir, { recursive: true, force: true })
      rmSync(proc.logDir, { recursive: true, force: true })
    },
  }
  return service
}

export type ChildService = Awaited<ReturnType<typeof startChildService>>

async function waitReady(proc: ReturnType<typeof spawnService>, baseUrl: string, up: readonly number[]): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (proc.exit !== null) {
      throw new Error(`service exited during start-up (${JSON.stringify(proc.exit)}): ${proc.stderr.trim() || proc.stdout.trim()}`)
    }
    try {
      const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(1_000) })
      await res.arrayBuffer()
      if (up.includes(res.status)) return
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      proc.child.kill('SIGKILL')
      throw new Error(`service not ready after ${READY_TIMEOUT_MS} ms: ${proc.stderr.trim()}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
