import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { sql } from 'kysely'
import type { Db } from '../store/schema.js'

/**
 * How long an ingest session's lease outlives its holder's last renewal (renewed every
 * SESSION_RENEW_EVERY_MS): five renewals missed in a row (a copy gone, or its event loop stalled
 * that long) and a surviving copy adopts the session.
 */
const SESSION_LEASE_TTL_MS = 10_000
export const SESSION_RENEW_EVERY_MS = 2_000

const dbNowMs = sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint`

/**
 * Which copy holds each persistent MQTT session on the external broker (`ingest_sessions`,
 * migration 0020), when several copies share one PostgreSQL. A copy registers the client ids of
 * its own sessions and renews their leases; a lease that runs out (by the database's clock, the
 * copies' clocks may differ) belongs to a copy that died, and one surviving copy claims it to
 * adopt that session (ingest-worker.ts).
 */
export class IngestSessionLeases {
  /** This process in `ingest_sessions.holder`: host, pid and a random part (pids repeat across restarts). */
  readonly holder = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`

  constructor(
    private readonly db: Db,
    private readonly ttlMs = SESSION_LEASE_TTL_MS,
  ) {}

  /**
   * Our own sessions are ours whoever held them last: a copy that comes back takes its sessions
   * back from a copy adopting them (the broker hands the session to the later connection too).
   * Also renews the sessions this copy is adopting.
   */
  async renew(ownClientIds: readonly string[]): Promise<void> {
    await sql`
      insert into ingest_sessions (client_id, holder, expires_at)
      select id, ${this.holder}, ${dbNowMs} + ${this.ttlMs} from unnest(${[...ownClientIds]}::text[]) as id
      on conflict (client_id) do update set holder = excluded.holder, expires_at = excluded.expires_at`.execute(this.db)
    await sql`update ingest_sessions set expires_at = ${dbNowMs} + ${this.ttlMs} where holder = ${this.holder}`.execute(this.db)
  }

  /** Claims the sessions whose lease ran out (a dead copy's), none of ours; resolves with their client ids. */
  async claimExpired(ownClientIds: readonly string[]): Promise<string[]> {
    const { rows } = await sql<{ client_id: string }>`
      update ingest_sessions set holder = ${this.holder}, expires_at = ${dbNowMs} + ${this.ttlMs}
      where client_id in (
        select client_id from ingest_sessions
        where expires_at < ${dbNowMs} and client_id <> all(${[...ownClientIds]}::text[])
        for update skip locked
      )
      returning client_id`.execute(this.db)
    return rows.map((r) => r.client_id)
  }

  /** Whether this copy still holds the lease (the session's own copy has not come back for it). */
  async holds(clientId: string): Promise<boolean> {
    const { rows } = await sql`select 1 from ingest_sessions where client_id = ${clientId} and holder = ${this.holder}`.execute(this.db)
    return rows.length > 0
  }

  /** Gives up an adoption that did not finish: the lease runs out at once, and a copy claims it again. */
  async release(clientId: string): Promise<void> {
    await sql`update ingest_sessions set expires_at = 0 where client_id = ${clientId} and holder = ${this.holder}`.execute(this.db)
  }

  /** The adopted session is gone from the broker: so is its row. */
  async forget(clientId: string): Promise<void> {
    await sql`delete from ingest_sessions where client_id = ${clientId} and holder = ${this.holder}`.execute(this.db)
  }
}
