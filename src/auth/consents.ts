import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import type { Db } from '../store/schema.js'

/**
 * What a person has allowed each third-party app, remembered per (user, client, scope) so the
 * consent page (RFC 9700 §4.13) is shown only when an app asks for something new. Consent ends
 * when the person signs out (POST /oauth/logout), answers "Deny", is disabled, or when a
 * replayed refresh token or code of that app revokes a family: each of those deletes the rows.
 */
export class ConsentStore {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Whether the user has allowed this client every one of `scopes` (and there is at least one). */
  async covers(userId: string, clientId: string, scopes: readonly string[]): Promise<boolean> {
    if (scopes.length === 0) return false
    const rows = await this.db
      .selectFrom('user_consents')
      .select('scope')
      .where('user_id', '=', userId)
      .where('client_id', '=', clientId)
      .where('scope', 'in', [...scopes])
      .execute()
    return rows.length === new Set(scopes).size
  }

  async remember(userId: string, clientId: string, scopes: readonly string[]): Promise<void> {
    if (scopes.length === 0) return
    const now = iso(this.clock.now())
    await this.db
      .insertInto('user_consents')
      .values([...new Set(scopes)].map((scope) => ({ user_id: userId, client_id: clientId, scope, granted_at: now })))
      .onConflict((oc) => oc.columns(['user_id', 'client_id', 'scope']).doNothing())
      .execute()
  }

  /** Forgets what the user allowed one client, or every client when none is named. */
  async forget(userId: string, clientId?: string): Promise<void> {
    let query = this.db.deleteFrom('user_consents').where('user_id', '=', userId)
    if (clientId !== undefined) query = query.where('client_id', '=', clientId)
    await query.execute()
  }
}
