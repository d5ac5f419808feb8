import { SenderOptions } from '@questdb/nodejs-client'

/**
 * QuestDB's HTTP SQL endpoint, `GET /exec?query=` (QuestDB REST API), reached with the host,
 * port, TLS and credentials of the same config string the ILP Sender uses. The string is parsed
 * by the client's own `SenderOptions`, so both always agree.
 */

export type ExecResult = { columns: { name: string; type: string }[]; dataset: unknown[][] }
export type Exec = (sql: string) => Promise<ExecResult>

/** QuestDB's default HTTP port (ILP over HTTP, /exec and the console share it). */
const DEFAULT_HTTP_PORT = 9000
const DEFAULT_TIMEOUT_MS = 10_000

export function httpOptionsOf(config: string): SenderOptions {
  const options = new SenderOptions(config)
  if (options.protocol !== 'http' && options.protocol !== 'https') {
    // ILP over TCP has no acknowledgement: a write could be lost after we had resolved it.
    throw new Error(
      `QUESTDB_CONFIG must use http:: or https:: (ILP over ${options.protocol} is never acknowledged), got "${options.protocol}::"`,
    )
  }
  return options
}

export function createExec(options: SenderOptions): Exec {
  const base = `${options.protocol}://${options.host}:${options.port ?? DEFAULT_HTTP_PORT}`
  const headers: Record<string, string> = {}
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  else if (options.username !== undefined && options.password !== undefined) {
    headers.authorization = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`
  }
  const timeoutMs = options.request_timeout ?? DEFAULT_TIMEOUT_MS

  return async function exec(sql) {
    const res = await fetch(`${base}/exec?query=${encodeURIComponent(sql)}`, { headers, signal: AbortSignal.timeout(timeoutMs) })
    const body = (await res.json().catch(() => null)) as (Partial<ExecResult> & { error?: string; ddl?: string }) | null
    if (!res.ok || body === null || body.error !== undefined) {
      throw new Error(`QuestDB /exec answered ${res.status}: ${body?.error ?? 'no JSON body'} (query: ${sql.slice(0, 200)})`)
    }
    return { columns: body.columns ?? [], dataset: body.dataset ?? [] }
  }
}

/** A SQL string literal; QuestDB's /exec has no bind parameters. */
export const quote = (text: string): string => `'${text.replaceAll("'", "''")}'`

/** Year 0 .. 9999 in ms: the range a QuestDB TIMESTAMP literal holds; callers may pass ±Infinity. */
const MAX_MS = 253_402_300_799_999
export const timestampMicros = (ms: number): string => `cast(${Math.trunc(Math.min(Math.max(ms, 0), MAX_MS)) * 1000} AS TIMESTAMP)`
