import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

// How long, and how much, a refused body is still read and thrown away after the answer.
const LINGER_MS = 2000
const LINGER_MAX_BYTES = 64 * 1024 * 1024

const lingering = new WeakSet<Socket>()

/**
 * RFC 9112 §9.6: a server that closes at once while the client is still sending makes its kernel
 * answer the unread bytes with a reset, and the client may lose the answer (413, 415) before it
 * reads it. So once node has written an answer marked `Connection: close`, the socket is
 * half-closed and read on, discarding, until the client closes, 2 s pass or 64 MiB more arrive.
 */
export function lingerOnClose(incoming: IncomingMessage | undefined): void {
  const socket = incoming?.socket
  if (!socket || socket.destroyed || incoming.readableEnded || lingering.has(socket)) return
  lingering.add(socket)
  let started = false
  // node's http server calls destroySoon on the socket once an answer marked close is written.
  socket.destroySoon = function lingeringDestroySoon() {
    if (started) return
    started = true
    const timer = setTimeout(() => socket.destroy(), LINGER_MS)
    timer.unref()
    let read = 0
    socket.on('data', (chunk: Buffer) => {
      read += chunk.length
      if (read > LINGER_MAX_BYTES) socket.destroy()
    })
    socket.once('end', () => socket.destroy())
    socket.once('close', () => clearTimeout(timer))
    socket.end()
    socket.resume()
  }
}
