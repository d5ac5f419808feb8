import { createServer, connect, type AddressInfo, type Socket } from 'node:net'

/**
 * A TCP proxy in front of a server, standing in for the network between the service and its
 * database: it forwards, or cuts every connection (a restart, an idle proxy giving up), or
 * refuses new ones (the server is down), or black-holes bytes (a partition: packets dropped,
 * nothing refused, nobody told).
 */
export type TcpProxy = {
  port: number
  /** Local ports of the proxy's connections to the server: `client_port` in pg_stat_activity. */
  upstreamPorts(): number[]
  /** Resets every connection, both sides. */
  cut(): void
  /** New connections are reset at once (`forward()` undoes it). */
  refuse(): void
  /** Connections reset by `refuse()` so far: how often the service tried while the server was down. */
  readonly refused: number
  /** Bytes go nowhere, both ways, on every connection, old and new (`forward()` undoes it). */
  blackHole(): void
  forward(): void
  close(): Promise<void>
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let mode: 'forward' | 'refuse' | 'black-hole' = 'forward'
  const pairs = new Set<{ client: Socket; upstream: Socket }>()
  let refused = 0
  const server = createServer((client) => {
    client.on('error', () => {})
    if (mode === 'refuse') {
      refused += 1
      return void client.resetAndDestroy()
    }
    const upstream = connect(target.port, target.host)
    upstream.on('error', () => {})
    const pair = { client, upstream }
    pairs.add(pair)
    client.on('data', (chunk) => void (mode === 'forward' && upstream.write(chunk)))
    upstream.on('data', (chunk) => void (mode === 'forward' && client.write(chunk)))
    const end = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('close', end)
    upstream.on('close', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const cut = () => {
    for (const { client, upstream } of pairs) {
      client.resetAndDestroy()
      upstream.resetAndDestroy()
    }
  }
  return {
    port: (server.address() as AddressInfo).port,
    upstreamPorts: () => [...pairs].map(({ upstream }) => upstream.localPort).filter((p): p is number => p !== undefined),
    cut,
    refuse: () => void (mode = 'refuse'),
    get refused() {
      return refused
    },
    blackHole: () => void (mode = 'black-hole'),
    forward: () => void (mode = 'forward'),
    async close() {
      cut()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}
