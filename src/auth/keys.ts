import { exportJWK, generateKeyPair, importJWK, type JWK, type CryptoKey } from 'jose'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { newId } from '../ids.js'
import type { Db } from '../store/schema.js'

type LoadedKey = { kid: string; privateKey: CryptoKey; publicKey: CryptoKey; publicJwk: JWK; activatesAt: number; retiresAt: number | null }

/**
 * The ES256 signing keys (RFC 7518 §3.4). Rotation publishes the next key in the JWKS before it
 * signs anything, and keeps the old one published until the last token it signed has expired.
 * Private keys live in the entity store as JWK; protect that store as you would the keys.
 */
export class KeyRing {
  private keys: LoadedKey[] = []

  constructor(private readonly db: Db, private readonly clock: Clock, private readonly tokenTtlS: number) {}

  /** Loads the keys, creating the first one on a fresh store. */
  async load(): Promise<void> {
    let rows = await this.db.selectFrom('signing_keys').selectAll().orderBy('activates_at').execute()
    if (rows.length === 0) {
      await this.insertKey(0) // the first key has no predecessor to overlap: active from the start
      rows = await this.db.selectFrom('signing_keys').selectAll().orderBy('activates_at').execute()
    }
    this.keys = await Promise.all(rows.map(async (row) => {
      const privateJwk = JSON.parse(row.private_jwk) as JWK
      const publicJwk = JSON.parse(row.public_jwk) as JWK
      return {
        kid: row.kid,
        privateKey: (await importJWK(privateJwk, 'ES256')) as CryptoKey,
        publicKey: (await importJWK(publicJwk, 'ES256')) as CryptoKey,
        publicJwk,
        activatesAt: Date.parse(row.activates_at),
        retiresAt: row.retires_at ? Date.parse(row.retires_at) : null,
      }
    }))
  }

  /** The newest key that is already active. */
  signingKey(): LoadedKey {
    const now = this.clock.now()
    const active = this.keys.filter((k) => k.activatesAt <= now && (k.retiresAt === null || k.retiresAt > now))
    const key = active.at(-1)
    if (!key) throw new Error('no active signing key')
    return key
  }

  verificationKey(kid: string): CryptoKey | undefined {
    const now = this.clock.now()
    return this.keys.find((k) => k.kid === kid && (k.retiresAt === null || k.retiresAt > now))?.publicKey
  }

  /** RFC 7517 key set: every key that is published (not yet retired), including the next one. */
  jwks(): { keys: JWK[] } {
    const now = this.clock.now()
    return {
      keys: this.keys
        .filter((k) => k.retiresAt === null || k.retiresAt > now)
        .map((k) => ({ ...k.publicJwk, kid: k.kid, alg: 'ES256', use: 'sig' })),
    }
  }

  /**
   * Adds a key that starts signing after `publishAheadS` (so verifiers caching the JWKS see it
   * first); the current keys retire once every token they signed has expired.
   */
  async rotate(publishAheadS = 0): Promise<{ kid: string; activates_at: string; previous_retires_at: string }> {
    const activatesAt = this.clock.now() + publishAheadS * 1_000
    const retiresAt = iso(activatesAt + this.tokenTtlS * 1_000)
    const kid = await this.insertKey(activatesAt)
    await this.db.updateTable('signing_keys').set({ retires_at: retiresAt })
      .where('kid', '!=', kid).where('retires_at', 'is', null).execute()
    await this.load()
    return { kid, activates_at: iso(activatesAt), previous_retires_at: retiresAt }
  }

  private async insertKey(activatesAtMs: number): Promise<string> {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true })
    const kid = newId('key')
    await this.db.insertInto('signing_keys').values({
      kid,
      private_jwk: JSON.stringify(await exportJWK(privateKey)),
      public_jwk: JSON.stringify(await exportJWK(publicKey)),
      created_at: iso(this.clock.now()),
      activates_at: iso(activatesAtMs),
      retires_at: null,
    }).execute()
    return kid
  }
}
