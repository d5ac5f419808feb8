/**
 * Which local process serves QUESTDB_CONFIG's HTTP address, so `bench:ingest --sink questdb` can
 * measure that process's CPU beside the service's. Linux only (/proc); null when the address is
 * not on this machine or no process of ours can be seen listening on it.
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs'

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]', '0.0.0.0'])
// QuestDB's HTTP port when the config names none (its documented default).
const QUESTDB_HTTP_PORT = 9000
// /proc/net/tcp's state column: 0A is LISTEN.
const LISTEN = '0A'

/** The port of a QUESTDB_CONFIG (`http::addr=host:port;…`) when its host is this machine, else null. */
export function localQuestdbPort(config: string): number | null {
  const addr = /(?:^|;|::)addr=([^;]+)/.exec(config)?.[1]
  if (addr === undefined) return null
  const colon = addr.lastIndexOf(':')
  const host = colon > 0 && !addr.endsWith(']') ? addr.slice(0, colon) : addr
  const port = colon > 0 && !addr.endsWith(']') ? Number(addr.slice(colon + 1)) : QUESTDB_HTTP_PORT
  return LOCAL_HOSTS.has(host) && Number.isInteger(port) ? port : null
}

/** The pid of the process listening on TCP `port` (IPv4 or IPv6), or null. */
export function listenerPid(port: number): number | null {
  const inodes = new Set<string>()
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string
    try {
      text = readFileSync(table, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      // local_address is HEXIP:HEXPORT; the socket's inode is the tenth column.
      if (cols.length > 9 && cols[3] === LISTEN && parseInt(cols[1]!.split(':')[1]!, 16) === port) inodes.add(cols[9]!)
    }
  }
  if (inodes.size === 0) return null
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let fds: string[]
    try {
      fds = readdirSync(`/proc/${entry}/fd`)
    } catch {
      continue // another user's process, or gone
    }
    for (const fd of fds) {
      try {
        const target = readlinkSync(`/proc/${entry}/fd/${fd}`)
        if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) return Number(entry)
      } catch {
        // closed meanwhile
      }
    }
  }
  return null
}
