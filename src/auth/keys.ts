import { createPrivateKey, type JsonWebKey as NodeJwk, type KeyObject } from 'node:crypto'
import { exportJWK, generateKeyPair, importJWK, type JWK, type CryptoKey } from 'jose'
import type { Clock } from '../clock.js'
import { newId } from '../ids.js'
import { retiredAt, SealedKeyTable, signsAt, type KeyPair, type KeyTimes, type OpenedKey, type Rotated } from '../store/key-rotation.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { Db } from '../store/schema.js'
import type { SecretBox } from '../store/secret-box.js'

type Imported = {
  privateKey: CryptoKey
  publicKey: CryptoKey
  publicJwk: JWK
  /** The private key for node:crypto's synchronous sign, which costs a fraction of WebCrypto's per token. */
  signer: KeyObject
}
type LoadedKey = Imported & KeyTimes

// Instances sharing a store (and the CLI) rotate keys through it. Each instance re-reads the key
// set once it is this old, so it signs with the current key and publishes the next one…
const RELOAD_AFTER_MS = 30_000
// …and at once when a token names a kid it has not loaded, at most this often, so made-up kids
// cannot turn every request into a store read.
const UNKNOWN_KID_RELOAD_MS = 1_000

/**
 * The ES256 signing keys (RFC 7518 §3.4). Rotation publishes the next key in the JWKS before it
 * signs anything, and keeps the old one published until the last token it signed has expired.
 * Private keys live in the entity store as JWK sealed by `box` (SECRETS_KEY): the store alone signs nothing.
 */
export class KeyRing {
  private keys: LoadedKey[] = []
  private checkedAtMs = -Infinity
  private unknownKidReloadAtMs = -Infinity
  private generation = 0
  // A key's material never changes (only when it activates and retires): each is imported once.
  private readonly imported = new Map<string, Promise<Imported>>()

  private readonly table: SealedKeyTable

  constructor(
    db: Db,
    box: SecretBox,
    private readonly clock: Clock,
    private readonly tokenTtlS: number,
  ) {
    this.table = new SealedKeyTable(db, box, clock, 'signing_keys')
  }

  /** Loads the keys, creating the first one on a fresh store. */
  async load(): Promise<void> {
    this.checkedAtMs = this.clock.now()
    const generation = ++this.generation
    const keys = await this.read()
    if (generation === this.generation) this.keys = keys // else a later read, of newer rows, applies
  }

  /** The newest key that is already active. */
  async signingKey(): Promise<LoadedKey> {
    await this.current()
    const now = this.clock.now()
    const key = this.keys.filter((k) => signsAt(k, now)).at(-1)
    if (!key) throw new Error('no active signing key')
    return key
  }

  /**
   * The signing key as last loaded, without waiting for the store: for signing inside a
   * transaction (a patient's link in the outbox), where a read through another connection
   * could wait on that very transaction (SQLite has one). A stale set is re-read in the background.
   */
  loadedSigningKey(): LoadedKey {
    if (this.clock.now() - this.checkedAtMs >= RELOAD_AFTER_MS) void this.current()
    const now = this.clock.now()
    const key = this.keys.filter((k) => signsAt(k, now)).at(-1)
    if (!key) throw new Error('no active signing key')
    return key
  }

  async verificationKey(kid: string): Promise<CryptoKey | undefined> {
    await this.current()
    const published = () => {
      const now = this.clock.now()
      return this.keys.find((k) => k.kid === kid && !retiredAt(k, now))?.publicKey
    }
    const known = published()
    if (known || this.keys.some((k) => k.kid === kid)) return known
    if (this.clock.now() - this.unknownKidReloadAtMs < UNKNOWN_KID_RELOAD_MS) return undefined
    this.unknownKidReloadAtMs = this.clock.now()
    await this.load()
    return published()
  }

  /** RFC 7517 key set: every key that is published (not yet retired), including the next one. */
  async jwks(): Promise<{ keys: JWK[] }> {
    await this.current()
    const now = this.clock.now()
    return {
      keys: this.keys.filter((k) => !retiredAt(k, now)).map((k) => ({ ...k.publicJwk, kid: k.kid, alg: 'ES256', use: 'sig' })),
    }
  }

  /**
   * Adds a key that starts signing after `publishAheadS` (so verifiers caching the JWKS see it
   * first); the current keys retire once every token they signed has expired. A key still
   * waiting to activate has signed nothing: the new one replaces it at once.
   */
  async rotate(publishAheadS = 0, record?: RecordAnswer<Rotated>): Promise<Rotated> {
    const rotated = await this.table.rotate(await newKeyPair(), publishAheadS, this.tokenTtlS, record)
    await this.load()
    return rotated
  }

  /** Re-reads the key set when it may be stale; an unreachable store leaves the loaded keys in use. */
  private async current(): Promise<void> {
    if (this.clock.now() - this.checkedAtMs < RELOAD_AFTER_MS) return
    await this.load().catch(() => {})
  }

  private async read(): Promise<LoadedKey[]> {
    const keys = await this.table.read(newKeyPair, async (times, opened) => ({ ...times, ...(await this.importOnce(times.kid, opened)) }))
    return Promise.all(keys)
  }

  private importOnce(kid: string, opened: () => OpenedKey): Promise<Imported> {
    let imported = this.imported.get(kid)
    if (!imported) {
      imported = (async () => {
        const { privateJwk, publicJwk } = opened()
        return {
          privateKey: (await importJWK(privateJwk as JWK, 'ES256')) as CryptoKey,
          publicKey: (await importJWK(publicJwk as JWK, 'ES256')) as CryptoKey,
          publicJwk: publicJwk as JWK,
          signer: createPrivateKey({ key: privateJwk as NodeJwk, format: 'jwk' }),
        }
      })()
      imported.catch(() => this.imported.delete(kid))
      this.imported.set(kid, imported)
    }
    return imported
  }
}

async function newKeyPair(): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true })
  return { kid: newId('key'), privateJwk: await exportJWK(privateKey), publicJwk: await exportJWK(publicKey) }
}
