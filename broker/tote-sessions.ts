import type { Client } from 'aedes'

/** A client id's session: the connection using it now (if any), and whether it outlives that connection. */
type Session = { live: Client | null; persistent: boolean }

/**
 * Which client ids each tote holds a session under, so that one tote's credentials cannot open
 * sessions without end (each keeps subscriptions, a will and a queue of messages).
 *
 * A client id holds a slot while it is connected, and after that for as long as its session is
 * kept: a connection with clean session 0 leaves a session behind [MQTT-3.1.2-4]; one with clean
 * session 1 ends it [MQTT-3.1.2-6]. A tote at its limit can still connect under any client id it
 * already holds (a new connection replaces the old one [MQTT-3.1.4-2]), and frees a slot by
 * connecting once with clean session 1. Kept in memory, like the sessions themselves.
 */
export class ToteSessions {
  private readonly byTote = new Map<string, Map<string, Session>>()
  private readonly toteOf = new WeakMap<Client, string>()

  constructor(private readonly maxPerTote: number) {}

  /** At CONNECT, once the tote is known: false if this would be one session too many. */
  claim(toteId: string, client: Client): boolean {
    let sessions = this.byTote.get(toteId)
    if (!sessions?.has(client.id) && (sessions?.size ?? 0) >= this.maxPerTote) return false
    if (sessions === undefined) this.byTote.set(toteId, (sessions = new Map()))
    sessions.set(client.id, { live: client, persistent: !client.clean })
    this.toteOf.set(client, toteId)
    return true
  }

  /** When a connection has ended: its client id keeps its slot only if the session is persistent. */
  release(client: Client): void {
    const toteId = this.toteOf.get(client)
    const sessions = toteId === undefined ? undefined : this.byTote.get(toteId)
    const session = sessions?.get(client.id)
    if (sessions === undefined || session?.live !== client) return // never claimed, or taken over since
    if (session.persistent) {
      session.live = null
      return
    }
    sessions.delete(client.id)
    if (sessions.size === 0) this.byTote.delete(toteId!)
  }

  /** How many client ids `toteId` holds a session under. */
  count(toteId: string): number {
    return this.byTote.get(toteId)?.size ?? 0
  }
}
