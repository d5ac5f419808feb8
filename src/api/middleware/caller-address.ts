import { getConnInfo } from '@hono/node-server/conninfo'
import type { Context } from 'hono'

/** Requests that reach the app without a socket (in-process `app.request()`) share this key. */
const NO_ADDRESS = 'unknown'

/**
 * The address a throttle counts a request against: the TCP peer, or with `trustProxy` the last
 * X-Forwarded-For entry, the one our own proxy appended (earlier entries are whatever the caller
 * chose to send, so they are never trusted).
 */
export function callerAddress(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = c.req.header('x-forwarded-for')?.split(',').at(-1)?.trim()
    if (forwarded) return forwarded
  }
  try {
    return getConnInfo(c).remote.address ?? NO_ADDRESS
  } catch {
    return NO_ADDRESS
  }
}
