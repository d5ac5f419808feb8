import type { Server as HttpServer } from 'node:http'
import type { Server } from 'node:net'

export class StartupError extends Error {}

/** Binds a server; a taken port becomes one clear line naming the variable that chose it. */
export function listen(server: Server | HttpServer, port: number, host: string, variable: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      const where = `${host}:${port}`
      if (error.code === 'EADDRINUSE') reject(new StartupError(`${variable}=${port}: port ${port} is already in use (${where}); stop the other process or set ${variable}`))
      else if (error.code === 'EACCES') reject(new StartupError(`${variable}=${port}: not allowed to listen on ${where}; use a port above 1023 or set ${variable}`))
      else reject(new StartupError(`${variable}=${port}: cannot listen on ${where}: ${error.message}`))
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
