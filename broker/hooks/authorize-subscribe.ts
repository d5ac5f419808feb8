import type { Client, Subscription } from 'aedes'
import { commandsTopic, errorsTopic } from '../topics.js'
import type { HookContext } from './types.js'

/**
 * SUBSCRIBE → a tote may subscribe to its own errors and commands topics, exactly (no
 * wildcards). Anything else is refused with return code 0x80 in the SUBACK (MQTT 3.1.1 §3.9.3);
 * the connection stays open.
 */
export function createAuthorizeSubscribe({ sessions, logger, metrics }: HookContext) {
  return function authorizeSubscribe(
    client: Client,
    subscription: Subscription,
    done: (error: Error | null, subscription?: Subscription | null) => void,
  ) {
    const toteId = sessions.get(client)
    if (toteId !== undefined && (subscription.topic === errorsTopic(toteId) || subscription.topic === commandsTopic(toteId))) {
      return done(null, subscription)
    }
    metrics.aclDenied?.inc({ action: 'subscribe' })
    logger.warn({ toteId, topic: subscription.topic }, 'mqtt subscribe refused by ACL')
    done(null, null) // null negates this subscription: SUBACK 0x80
  }
}
