import type { Server } from 'node:net'

export class StartupError extends Error {}

/** Binds a server; a taken port becomes one clear line naming the variable that chose it. */
export function listen(server: Server, port: number, host: string, variable: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') reject(new StartupError(`${variable}=${port}: port ${port} is already in use; stop the other process or choose another ${variable}`))
      else if (error.code === 'EACCES') reject(new StartupError(`${variable}=${port}: not allowed to bind port ${port}; choose one above 1023`))
      else reject(error)
    }
    server.once('error', onError)
    server.listen(port, host, () => {
      server.off('error', onError)
      const address = server.address()
      resolve(typeof address === 'object' && address ? address.port : port)
    })
  })
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()))
}
