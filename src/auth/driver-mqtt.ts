import type { Clock } from '../clock.js'
import type { TokenService } from './tokens.js'
import type { UserDirectory } from './users.js'

/**
 * A driver's app connects to the embedded broker as the driver (docs/fleet.md, Positions over
 * MQTT): username the driver id (`dr_…`), password the access token of the driver's own user
 * (role `driver`, linked to that driver) holding `custody:write`. A token of another driver, of a
 * disabled user, revoked or expired, is refused (CONNACK 4). The connection ends when the token does.
 */
export function driverAuthenticator({
  tokens,
  users,
  clock,
}: {
  tokens: Pick<TokenService, 'verify'>
  users: Pick<UserDirectory, 'standingOf'>
  clock: Clock
}) {
  return async function authenticateDriver(username: string, password: string): Promise<{ driverId: string; expiresAtMs: number } | null> {
    let principal
    try {
      principal = await tokens.verify(password)
    } catch {
      return null // not a token of ours, expired or revoked: bad user name or password
    }
    if (!principal.sub.startsWith('us_') || !principal.scopes.has('custody:write')) return null
    const standing = await users.standingOf(principal.sub)
    if (!standing.active || standing.driverId !== username) return null
    // The broker times the close on its own clock: what is left of the token, from now.
    return { driverId: username, expiresAtMs: Date.now() + Math.max(0, principal.exp * 1_000 - clock.now()) }
  }
}
