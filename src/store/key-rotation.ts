import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import type { RecordAnswer } from './record-answer.js'
import type { Db, Executor } from './schema.js'
import { sealingContext } from './sealed-secrets.js'
import type { SecretBox } from './secret-box.js'

/** The tables of keys that rotate: the token signing keys (JWKS) and the webhook `v1a` keys. */
type RotatingKeys = 'signing_keys' | 'webhook_signing_keys'

/** When a key signs and while it is published, epoch ms; `retiresAt` null: not retired. */
export type KeyTimes = { kid: string; activatesAt: number; retiresAt: number | null }

/** A key's private JWK opened from its seal, its public JWK as stored, and when it signs. */
export type OpenedKey = KeyTimes & { privateJwk: object; publicJwk: object }

export type Rotated = { kid: string; activates_at: string; previous_retires_at: string }

/** Signs now: active and not retired. */
export const signsAt = (key: KeyTimes, now: number): boolean => key.activatesAt <= now && !retiredAt(key, now)

/** Retired keys leave the published key set. */
export const retiredAt = (key: KeyTimes, now: number): boolean => key.retiresAt !== null && key.retiresAt <= now

/**
 * One table of rotating keys whose private halves are sealed by `box` (SECRETS_KEY), so the store
 * alone signs nothing. The rings (auth/keys.ts, webhooks/signing-keys.ts) own the key type; this
 * owns the rows: reading them oldest first, adding one, and a rotation's retirements.
 */
export class SealedKeyTable {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    private readonly table: RotatingKeys,
  ) {}

  /**
   * Every key, oldest first, private halves opened by `open` (called only for kids it wants, so a
   * ring can keep what it has already imported). A fresh store gets its first key from `generate`,
   * active from the start: it has no predecessor to overlap.
   */
  async read<T>(generate: () => KeyPair | Promise<KeyPair>, open: (key: KeyTimes, sealed: () => OpenedKey) => T): Promise<T[]> {
    // Ties on activates_at fall back to the kid, a ULID: the later key is the newer one.
    const select = () => this.db.selectFrom(this.table).selectAll().orderBy('activates_at').orderBy('kid').execute()
    let rows = await select()
    if (rows.length === 0) {
      await this.insert(await generate(), 0)
      rows = await select()
    }
    return rows.map((row) => {
      const times: KeyTimes = {
        kid: row.kid,
        activatesAt: Date.parse(row.activates_at),
        retiresAt: row.retires_at ? Date.parse(row.retires_at) : null,
      }
      return open(times, () => ({
        ...times,
        privateJwk: JSON.parse(this.box.open(sealingContext(this.table, row.kid), row.private_jwk)) as object,
        publicJwk: JSON.parse(row.public_jwk) as object,
      }))
    })
  }

  /**
   * Adds `pair`, signing after `publishAheadS`; the keys before it retire `retireAfterS` after
   * that (a key still waiting to sign has signed nothing and retires at once), in one transaction
   * with the answer `record` keeps.
   */
  async rotate(pair: KeyPair, publishAheadS: number, retireAfterS: number, record?: RecordAnswer<Rotated>): Promise<Rotated> {
    const now = iso(this.clock.now())
    const activatesAt = this.clock.now() + publishAheadS * 1_000
    const retiresAt = iso(activatesAt + retireAfterS * 1_000)
    await this.insert(pair, activatesAt)
    const rotated = { kid: pair.kid, activates_at: iso(activatesAt), previous_retires_at: retiresAt }
    await this.db.transaction().execute(async (trx) => {
      await retireOthers(trx, this.table, pair.kid, now, retiresAt)
      await record?.(trx, rotated)
    })
    return rotated
  }

  private async insert(pair: KeyPair, activatesAtMs: number): Promise<void> {
    await this.db
      .insertInto(this.table)
      .values({
        kid: pair.kid,
        private_jwk: this.box.seal(sealingContext(this.table, pair.kid), JSON.stringify(pair.privateJwk)),
        public_jwk: JSON.stringify(pair.publicJwk),
        created_at: iso(this.clock.now()),
        activates_at: iso(activatesAtMs),
        retires_at: null,
      })
      .execute()
  }
}

/** A new key: its id and both halves as JWK. */
export type KeyPair = { kid: string; privateJwk: object; publicJwk: object }

async function retireOthers(trx: Executor, table: RotatingKeys, kid: string, now: string, retiresAt: string): Promise<void> {
  await trx.updateTable(table).set({ retires_at: now }).where('kid', '!=', kid).where('activates_at', '>', now).execute()
  await trx.updateTable(table).set({ retires_at: retiresAt }).where('kid', '!=', kid).where('retires_at', 'is', null).execute()
}
