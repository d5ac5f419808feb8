import { createPrivateKey, generateKeyPairSync, sign, type JsonWebKey, type KeyObject } from 'node:crypto'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { newId } from '../ids.js'
import { retireForRotation } from '../store/key-rotation.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { Db } from '../store/schema.js'
import { sealingContext } from '../store/sealed-secrets.js'
import type { SecretBox } from '../store/secret-box.js'

/** One public key of GET /.well-known/webhook-keys.json (RFC 8037 §2: OKP, Ed25519). */
export type WebhookPublicKey = { kty: 'OKP'; crv: 'Ed25519'; x: string; kid: string; alg: 'EdDSA'; use: 'sig' }

type LoadedKey = { kid: string; publicJwk: WebhookPublicKey; signer: KeyObject; activatesAt: number; retiresAt: number | null }

/** Copies sharing a store re-read the key set this often, as the token KeyRing does. */
const RELOAD_AFTER_MS = 30_000
/** After a rotation the old key keeps signing beside the new one this long, as a rotated `v1` secret does. */
export const DEFAULT_OVERLAP_S = 86_400

/**
 * The service's Ed25519 webhook keys (`v1a` signatures). A rotation publishes the new key at once
 * and it signs after `publishAheadS`; the old key keeps signing beside it for the overlap, so a
 * subscriber still holding the previous key set verifies every request, then it retires and
 * leaves the key set. Private keys live in the entity store as JWK sealed by `box` (SECRETS_KEY).
 */
export class WebhookKeyRing {
  private keys: LoadedKey[] = []
  private checkedAtMs = -Infinity

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly clock: Clock,
  ) {}

  /** Loads the keys, creating the first one on a fresh store. */
  async load(): Promise<void> {
    this.checkedAtMs = this.clock.now()
    const select = () => this.db.selectFrom('webhook_signing_keys').selectAll().orderBy('activates_at').orderBy('kid').execute()
    let rows = await select()
    if (rows.length === 0) {
      await this.insertKey(0)
      rows = await select()
    }
    this.keys = rows.map((row) => {
      const privateJwk = JSON.parse(this.box.open(sealingContext('webhook_signing_keys', row.kid), row.private_jwk)) as JsonWebKey
      return {
        kid: row.kid,
        publicJwk: JSON.parse(row.public_jwk) as WebhookPublicKey,
        signer: createPrivateKey({ key: privateJwk, format: 'jwk' }),
        activatesAt: Date.parse(row.activates_at),
        retiresAt: row.retires_at ? Date.parse(row.retires_at) : null,
      }
    })
  }

  /**
   * Standard Webhooks `v1a`: base64(Ed25519(`${id}.${timestamp}.${body}`)), one per key that signs
   * now (two during a rotation's overlap); a verifier accepts the request when any one verifies.
   */
  async signatures(signed: string): Promise<string[]> {
    await this.current()
    const now = this.clock.now()
    const signing = this.keys.filter((k) => k.activatesAt <= now && (k.retiresAt === null || k.retiresAt > now))
    if (signing.length === 0) throw new Error('no active webhook signing key')
    return signing.map((k) => `v1a,${sign(null, Buffer.from(signed), k.signer).toString('base64')}`)
  }

  /** Every key not yet retired, the next one included: a JWKS-like document (RFC 7517 §5). */
  async keySet(): Promise<{ keys: WebhookPublicKey[] }> {
    await this.current()
    const now = this.clock.now()
    return { keys: this.keys.filter((k) => k.retiresAt === null || k.retiresAt > now).map((k) => k.publicJwk) }
  }

  /** A new key, published now and signing after `publishAheadS`; the keys before it retire `overlapS` after that. */
  async rotate(
    publishAheadS: number,
    overlapS: number,
    record?: RecordAnswer<{ kid: string; activates_at: string; previous_retires_at: string }>,
  ): Promise<{ kid: string; activates_at: string; previous_retires_at: string }> {
    const now = iso(this.clock.now())
    const activatesAt = this.clock.now() + publishAheadS * 1_000
    const retiresAt = iso(activatesAt + overlapS * 1_000)
    const kid = await this.insertKey(activatesAt)
    const rotated = { kid, activates_at: iso(activatesAt), previous_retires_at: retiresAt }
    await this.db.transaction().execute(async (trx) => {
      await retireForRotation(trx, 'webhook_signing_keys', kid, now, retiresAt)
      await record?.(trx, rotated)
    })
    await this.load()
    return rotated
  }

  /** Re-reads the key set when it may be stale; an unreachable store leaves the loaded keys in use. */
  private async current(): Promise<void> {
    if (this.clock.now() - this.checkedAtMs < RELOAD_AFTER_MS) return
    await this.load().catch(() => {})
  }

  private async insertKey(activatesAtMs: number): Promise<string> {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519')
    const kid = newId('whk')
    const { x } = publicKey.export({ format: 'jwk' })
    const publicJwk: WebhookPublicKey = { kty: 'OKP', crv: 'Ed25519', x: x!, kid, alg: 'EdDSA', use: 'sig' }
    await this.db
      .insertInto('webhook_signing_keys')
      .values({
        kid,
        private_jwk: this.box.seal(sealingContext('webhook_signing_keys', kid), JSON.stringify(privateKey.export({ format: 'jwk' }))),
        public_jwk: JSON.stringify(publicJwk),
        created_at: iso(this.clock.now()),
        activates_at: iso(activatesAtMs),
        retires_at: null,
      })
      .execute()
    return kid
  }
}
