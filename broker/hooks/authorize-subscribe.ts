import type { Client, Subscription } from 'aedes'
import { commandsTopic, driverErrorsTopic, errorsTopic, isDriverId } from '../topics.js'
import type { HookContext } from './types.js'

/**
 * SUBSCRIBE → a tote may subscribe to its own errors and commands topics, exactly (no
 * wildcards); a driver to its own errors topic only. Anything else is refused with return code 0x80 in the SUBACK (MQTT 3.1.1 §3.9.3);
 * the connection stays open.
 */
export function createAuthorizeSubscribe({ sessions, logger, metrics }: HookContext) {
  return function authorizeSubscribe(
    client: Client,
    subscription: Subscription,
    done: (error: Error | null, subscription?: Subscription | null) => void,
  ) {
    const toteId = sessions.get(client)
    if (toteId !== undefined && allowed(toteId, subscription.topic)) return done(null, subscription)
    metrics.aclDenied?.inc({ action: 'subscribe' })
    logger.warn({ toteId, topic: subscription.topic }, 'mqtt subscribe refused by ACL')
    done(null, null) // null negates this subscription: SUBACK 0x80
  }
}

const allowed = (id: string, topic: string): boolean =>
  isDriverId(id) ? topic === driverErrorsTopic(id) : topic === errorsTopic(id) || topic === commandsTopic(id)
