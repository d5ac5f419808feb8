/**
 * A minimal MQTT 3.1.1 client for the publisher of `npm run bench:ingest` (`--wire raw`): one TCP
 * connection per tote, CONNECT with the tote's own credentials, SUBSCRIBE to its errors topic,
 * QoS 1 PUBLISHes written by the caller, PUBACKs (and PUBLISHes on the errors topic, answered
 * with a PUBACK) read straight off the socket.
 *
 * Why not mqtt.js: its receive path (stream pipe, packet parser, ping rescheduling, `debug`
 * calls, a nextTick per packet) cost more CPU per PUBACK than the bare broker spends on the
 * whole message, so on a 2-core machine the publisher, not the broker, set the limit and its own
 * event-loop delay showed up in the measured PUBACK latency. A tote's firmware client is far
 * lighter than mqtt.js; this is closer to it.
 */
import { connect as connectTcp, type Socket } from 'node:net'

export type RawHandlers = {
  /** A PUBACK for packet identifier `id`. */
  onPuback(id: number): void
  /** A PUBLISH from the broker (the tote's errors topic). */
  onMessage(topic: string, payload: Buffer): void
  /** The connection is gone (after connect succeeded). */
  onClose(): void
}

export type RawConnection = {
  socket: Socket
  connected: boolean
  /** Sends DISCONNECT and closes. */
  end(): Promise<void>
}

const utf8Field = (s: string): Buffer => {
  const bytes = Buffer.from(s, 'utf8')
  const out = Buffer.allocUnsafe(2 + bytes.length)
  out.writeUInt16BE(bytes.length, 0)
  bytes.copy(out, 2)
  return out
}

/** Fixed header + remaining length (MQTT 3.1.1 §2.2). */
function packet(firstByte: number, body: Buffer): Buffer {
  const header: number[] = [firstByte]
  let n = body.length
  do {
    const digit = n % 128
    n = Math.floor(n / 128)
    header.push(n > 0 ? digit | 0x80 : digit)
  } while (n > 0)
  return Buffer.concat([Buffer.from(header), body])
}

export function connectRaw(
  url: string,
  opts: { clientId: string; username: string; password: string; keepaliveS: number; subscribe?: string },
  handlers: RawHandlers,
  timeoutMs = 30_000,
): Promise<RawConnection> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connectTcp({ host: hostname, port: Number(port), noDelay: true })
    const conn: RawConnection = {
      socket,
      connected: false,
      end: () =>
        new Promise<void>((done) => {
          if (socket.destroyed) return done()
          socket.once('close', () => done())
          socket.end(Buffer.from([0xe0, 0x00])) // DISCONNECT
        }),
    }
    let settled = false
    const fail = (err: Error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      reject(err)
    }
    const timer = setTimeout(() => fail(new Error('connect timed out')), timeoutMs)
    let ping: NodeJS.Timeout | null = null
    const ready = () => {
      settled = true
      clearTimeout(timer)
      conn.connected = true
      // Any packet counts for the broker's keep-alive; a PINGREQ at half the period keeps an idle tote connected.
      if (opts.keepaliveS > 0) {
        ping = setInterval(() => socket.write(Buffer.from([0xc0, 0x00])), (opts.keepaliveS * 1_000) / 2)
        ping.unref()
      }
      resolve(conn)
    }

    socket.once('connect', () => {
      const flags = 0x80 | 0x40 | 0x02 // user name, password, clean session
      const body = Buffer.concat([
        utf8Field('MQTT'),
        Buffer.from([4, flags, opts.keepaliveS >> 8, opts.keepaliveS & 0xff]),
        utf8Field(opts.clientId),
        utf8Field(opts.username),
        utf8Field(opts.password),
      ])
      socket.write(packet(0x10, body))
    })
    socket.on('error', (err) => fail(err))
    socket.on('close', () => {
      if (ping) clearInterval(ping)
      if (!settled) return fail(new Error('connection closed before CONNACK'))
      if (conn.connected) {
        conn.connected = false
        handlers.onClose()
      }
    })

    // Incoming packets: PUBACK is by far the most common, and arrives whole in one read.
    let pending: Buffer | null = null
    socket.on('data', (chunk: Buffer) => {
      const buf = pending === null ? chunk : Buffer.concat([pending, chunk])
      pending = null
      let at = 0
      while (at < buf.length) {
        const type = buf[at]! >> 4
        // Remaining length: up to 4 bytes.
        let length = 0
        let multiplier = 1
        let i = at + 1
        let complete = false
        for (; i < buf.length && i < at + 5; i++) {
          length += (buf[i]! & 0x7f) * multiplier
          multiplier *= 128
          if ((buf[i]! & 0x80) === 0) {
            complete = true
            i++
            break
          }
        }
        if (!complete || i + length > buf.length) break
        const start = i
        const end = i + length
        if (type === 4) {
          // PUBACK
          handlers.onPuback(buf.readUInt16BE(start))
        } else if (type === 3) {
          // PUBLISH (errors topic)
          const qos = (buf[at]! >> 1) & 3
          const topicLength = buf.readUInt16BE(start)
          const topic = buf.toString('utf8', start + 2, start + 2 + topicLength)
          let p = start + 2 + topicLength
          if (qos > 0) {
            const id = buf.readUInt16BE(p)
            p += 2
            socket.write(Buffer.from([0x40, 0x02, id >> 8, id & 0xff]))
          }
          handlers.onMessage(topic, buf.subarray(p, end))
        } else if (type === 2) {
          // CONNACK
          const code = buf[start + 1]!
          if (code !== 0) return fail(new Error(`connection refused: CONNACK return code ${code}`))
          if (opts.subscribe === undefined) ready()
          else socket.write(packet(0x82, Buffer.concat([Buffer.from([0x00, 0x01]), utf8Field(opts.subscribe), Buffer.from([1])])))
        } else if (type === 9) {
          // SUBACK
          if (buf[start + 2] === 0x80) return fail(new Error(`subscription to ${opts.subscribe} refused`))
          ready()
        } // PINGRESP (13) and anything else: nothing to do
        at = end
      }
      if (at < buf.length) pending = buf.subarray(at)
    })
  })
}
