/**
 * The ceiling for `npm run bench:ingest`: a bare embedded Aedes broker on a plain TCP server whose
 * only consumer is `JSON.parse` of each payload in authorizePublish (no storage, no rules, every
 * CONNECT accepted). Whatever the real service reaches, it cannot beat this on the same machine
 * with the same publisher. Reports its port to the parent over IPC.
 */
import { createServer, type AddressInfo } from 'node:net'
import { Aedes } from 'aedes'

let parsed = 0
let refused = 0

const aedes = await Aedes.createBroker({
  authenticate: (_client, _username, _password, done) => done(null, true),
  authorizePublish: (_client, packet, done) => {
    try {
      JSON.parse(packet.payload.toString())
      parsed++
      done(null)
    } catch (err) {
      refused++
      done(err as Error)
    }
  },
})

const server = createServer((socket) => {
  socket.setNoDelay(true) // as the service's listener does: a PUBACK is tiny and the tote waits for it
  aedes.handle(socket)
})
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
process.send!({ type: 'listening', port: (server.address() as AddressInfo).port })

process.on('message', (message: { type: string }) => {
  if (message.type !== 'stop') return
  server.close()
  aedes.close(() => {
    process.send!({ type: 'stopped', parsed, refused }, () => process.exit(0))
  })
})
process.on('disconnect', () => process.exit(0))
