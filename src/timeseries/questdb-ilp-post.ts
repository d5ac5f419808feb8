import http from 'node:http'
import https from 'node:https'
import type { SenderOptions } from '@questdb/nodejs-client'

/**
 * The POST of an ILP body (questdb-ilp.ts) to QuestDB's `/write` (ILP over HTTP: 204 once
 * committed to the table's WAL). The client still parses the config string (SenderOptions), so
 * host, port, TLS and credentials mean the same as for /exec (questdb-exec.ts).
 */

export type IlpPost = ((body: Buffer, timeoutMs: number) => Promise<void>) & { close(): void }

/**
 * One request per call, on connections of its own (`connections` keep-alive sockets): the
 * writes never queue behind the reads that /exec sends over fetch's shared pool (a thousand
 * deliveries loading their state at once held them past their deadline). A non-204 answer
 * rejects with `statusCode=<n>` in its message (what questdb-sink.ts's isRetriable reads); no
 * answer (refused, reset, timed out) rejects without one.
 */
export function createIlpPost(options: SenderOptions, connections: number): IlpPost {
  const tls = options.protocol === 'https'
  const agent = tls
    ? new https.Agent({ keepAlive: true, maxSockets: connections })
    : new http.Agent({ keepAlive: true, maxSockets: connections })
  const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8' }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  else if (options.username !== undefined && options.password !== undefined) {
    headers.authorization = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`
  }
  const target = { host: options.host, port: options.port ?? 9000, path: '/write?precision=n', method: 'POST', agent }
  const post = (body: Buffer, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      const req = (tls ? https : http).request({ ...target, headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          clearTimeout(timer)
          if (res.statusCode === 204 || res.statusCode === 200) resolve()
          else
            reject(
              new Error(`QuestDB /write answered statusCode=${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`),
            )
        })
        res.on('error', reject)
      })
      const timer = setTimeout(() => req.destroy(new Error(`no answer from QuestDB within ${timeoutMs} ms`)), Math.max(1, timeoutMs))
      req.on('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
      req.end(body)
    })
  return Object.assign(post, { close: () => agent.destroy() })
}
