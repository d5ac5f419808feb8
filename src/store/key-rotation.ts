import type { Executor } from './schema.js'

/** The tables of keys that rotate: the token signing keys (JWKS) and the webhook `v1a` keys. */
type RotatingKeys = 'signing_keys' | 'webhook_signing_keys'

/**
 * The other keys of `table` give way to the new key `kid`: one still waiting to sign has signed
 * nothing and retires now; those signing keep signing until `retiresAt`, so whatever they signed
 * still verifies meanwhile.
 */
export async function retireForRotation(trx: Executor, table: RotatingKeys, kid: string, now: string, retiresAt: string): Promise<void> {
  await trx.updateTable(table).set({ retires_at: now }).where('kid', '!=', kid).where('activates_at', '>', now).execute()
  await trx.updateTable(table).set({ retires_at: retiresAt }).where('kid', '!=', kid).where('retires_at', 'is', null).execute()
}
