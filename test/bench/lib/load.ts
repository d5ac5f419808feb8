import autocannon from 'autocannon'

export type LoadFigures = {
  /** Responses per second over the whole run (total / seconds). */
  rps: number
  p50_ms: number
  p99_ms: number
  /** Connection errors and timeouts. */
  errors: number
  non2xx: number
  total: number
  /** The slowest one-second window: "sustained" means this stays near rps. */
  min_rps_1s: number
  connections: number
  seconds: number
}

export type LoadRequest = {
  method: 'GET' | 'POST'
  path: string
  headers: Record<string, string>
  body?: string
  setupRequest?: autocannon.Request['setupRequest']
}

/**
 * Drives `connections` keep-alive connections for `seconds` against one request shape, in this
 * process (autocannon's default mode: no worker threads, so the load generator costs one core
 * at most, next to the service's one event loop).
 */
export async function drive({
  url,
  connections,
  seconds,
  request,
}: {
  url: string
  connections: number
  seconds: number
  request: LoadRequest
}): Promise<LoadFigures> {
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    // Each response is awaited before the next request on its connection: latency is what a caller sees.
    pipelining: 1,
    timeout: 10,
    requests: [request as autocannon.Request],
  })
  const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits
  return {
    rps: round(result.requests.total / result.duration, 0),
    p50_ms: round(result.latency.p50),
    p99_ms: round(result.latency.p99),
    errors: result.errors,
    non2xx: result.non2xx,
    total: result.requests.total,
    min_rps_1s: result.requests.min,
    connections,
    seconds: round(result.duration),
  }
}
