import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http'
import type { Server } from 'node:net'
import { StartupError } from './startup-error.js'

export { StartupError }

/**
 * Binds a server; a failure becomes one clear line naming the variable to change: the port's
 * variable for a taken or forbidden port, HOST for an address this machine does not have.
 */
export function listen(server: Server | HttpServer, port: number, host: string, variable: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      const where = `${host}:${port}`
      if (error.code === 'EADDRINUSE')
        reject(
          new StartupError(`${variable}=${port}: port ${port} is already in use (${where}); stop the other process or set ${variable}`),
        )
      else if (error.code === 'EACCES')
        reject(new StartupError(`${variable}=${port}: not allowed to listen on ${where}; use a port above 1023 or set ${variable}`))
      // getaddrinfo failed (not an address, unknown name) or the address is not one of this machine's.
      else if (
        error.code === 'ENOTFOUND' ||
        error.code === 'EAI_AGAIN' ||
        error.code === 'EADDRNOTAVAIL' ||
        error.code === 'EAI_FAIL' ||
        error.code === 'EAI_NONAME'
      ) {
        reject(
          new StartupError(
            `HOST=${host}: cannot listen on that address (${error.code}); set HOST to an address of this machine, e.g. 0.0.0.0 (all interfaces) or 127.0.0.1`,
          ),
        )
      } else reject(new StartupError(`${variable}=${port}: cannot listen on ${where}: ${error.message}`))
    }
    server.once('error', onError)
    server.listen(port, host, () => {
      server.off('error', onError)
      const address = server.address()
      resolve(typeof address === 'object' && address ? address.port : port)
    })
  })
}

export function closeServer(server: Server | HttpServer): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()))
}

/**
 * Lets an HTTP server stop under keep-alive load. `server.close()` alone only stops accepting:
 * a keep-alive client that keeps sending requests keeps its connection, and close() never
 * completes. `stop(graceMs)` closes idle connections at once, answers every further response
 * with `Connection: close` (RFC 9112 §9.6: the connection closes after that response), and
 * cuts whatever is still open after `graceMs`. Install before the server starts listening.
 */
export function drainOnClose(server: HttpServer): { stop(graceMs: number): Promise<void> } {
  let stopping = false
  const inFlight = new Set<ServerResponse>()
  // Prepended: runs before the application's listener, so the header is set before it answers.
  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (stopping) res.setHeader('connection', 'close')
    inFlight.add(res)
    // One listener per request ('close' follows 'finish', and also comes for a cut connection):
    // this runs for every request, and each listener costs the event loop.
    res.on('close', () => {
      inFlight.delete(res)
      // A response that began before the stop (a live event stream) could not say `Connection:
      // close`; once it ends while stopping, its now idle keep-alive connection is closed too.
      if (stopping) setImmediate(() => server.closeIdleConnections())
    })
  })
  return {
    async stop(graceMs) {
      stopping = true
      for (const res of inFlight) if (!res.headersSent) res.setHeader('connection', 'close')
      const closed = closeServer(server) // stop accepting; resolves when the last connection is gone
      server.closeIdleConnections()
      let timer: NodeJS.Timeout | undefined
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          server.closeAllConnections()
          resolve()
        }, graceMs)
      })
      await Promise.race([closed, deadline])
      clearTimeout(timer)
      await closed
    },
  }
}
