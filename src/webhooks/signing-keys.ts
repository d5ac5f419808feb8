import { createPrivateKey, generateKeyPairSync, sign, type JsonWebKey, type KeyObject } from 'node:crypto'
import type { Clock } from '../clock.js'
import { newId } from '../ids.js'
import { retiredAt, SealedKeyTable, signsAt, type KeyPair, type KeyTimes, type Rotated } from '../store/key-rotation.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { Db } from '../store/schema.js'
import type { SecretBox } from '../store/secret-box.js'

/** One public key of GET /.well-known/webhook-keys.json (RFC 8037 §2: OKP, Ed25519). */
export type WebhookPublicKey = { kty: 'OKP'; crv: 'Ed25519'; x: string; kid: string; alg: 'EdDSA'; use: 'sig' }

type LoadedKey = KeyTimes & { publicJwk: WebhookPublicKey; signer: KeyObject }

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

  private readonly table: SealedKeyTable

  constructor(
    db: Db,
    box: SecretBox,
    private readonly clock: Clock,
  ) {
    this.table = new SealedKeyTable(db, box, clock, 'webhook_signing_keys')
  }

  /** Loads the keys, creating the first one on a fresh store. */
  async load(): Promise<void> {
    this.checkedAtMs = this.clock.now()
    this.keys = await this.table.read(newKeyPair, (_times, opened) => {
      const { privateJwk, publicJwk, ...times } = opened()
      return {
        ...times,
        publicJwk: publicJwk as WebhookPublicKey,
        signer: createPrivateKey({ key: privateJwk as JsonWebKey, format: 'jwk' }),
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
    const signing = this.keys.filter((k) => signsAt(k, now))
    if (signing.length === 0) throw new Error('no active webhook signing key')
    return signing.map((k) => `v1a,${sign(null, Buffer.from(signed), k.signer).toString('base64')}`)
  }

  /** Every key not yet retired, the next one included: a JWKS-like document (RFC 7517 §5). */
  async keySet(): Promise<{ keys: WebhookPublicKey[] }> {
    await this.current()
    const now = this.clock.now()
    return { keys: this.keys.filter((k) => !retiredAt(k, now)).map((k) => k.publicJwk) }
  }

  /** A new key, published now and signing after `publishAheadS`; the keys before it retire `overlapS` after that. */
  async rotate(publishAheadS: number, overlapS: number, record?: RecordAnswer<Rotated>): Promise<Rotated> {
    const rotated = await this.table.rotate(newKeyPair(), publishAheadS, overlapS, record)
    await this.load()
    return rotated
  }

  /** Re-reads the key set when it may be stale; an unreachable store leaves the loaded keys in use. */
  private async current(): Promise<void> {
    if (this.clock.now() - this.checkedAtMs < RELOAD_AFTER_MS) return
    await this.load().catch(() => {})
  }
}

function newKeyPair(): KeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519')
  const kid = newId('whk')
  const { x } = publicKey.export({ format: 'jwk' })
  const publicJwk: WebhookPublicKey = { kty: 'OKP', crv: 'Ed25519', x: x!, kid, alg: 'EdDSA', use: 'sig' }
  return { kid, privateJwk: privateKey.export({ format: 'jwk' }), publicJwk }
}
