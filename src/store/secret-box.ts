import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto'

/** The bytes of a key-encryption key: 256 bits, for AES-256. */
export const KEY_BYTES = 32

// `rxs1.<key id>.<iv>.<tag>.<ciphertext>`, base64url: a stored clear value never starts with this
// (a JWK starts with `{`, a webhook secret with `whsec_`).
const FORMAT = 'rxs1'
const IV_BYTES = 12 // NIST SP 800-38D §8.2.2: 96-bit random IVs, far below 2^32 seals per key
// Opened values kept in memory: an AES-GCM open costs tens of µs (more than the webhook's HMAC),
// and the dispatcher opens the same endpoint's secret for every message. Far more than the
// endpoints and signing keys a store holds; past it the memo starts over.
const MEMO_ENTRIES = 10_000

/** Thrown when a sealed value names a key this process does not hold, or fails authentication. */
class SecretBoxError extends Error {}

type Key = { id: string; aead: Buffer }

/**
 * Seals the secrets the service must use again (signing keys, webhook and writeback secrets)
 * with AES-256-GCM under a key-encryption key, and opens them. Every sealed value names the key
 * that sealed it, so a process holding the current key and the previous ones opens values of
 * both while `keys rewrap` moves them to the current one. `context` (the table and row id) is
 * authenticated with the value, so a sealed value copied to another row does not open there.
 */
export class SecretBox {
  private readonly current: Key
  private readonly byId: Map<string, Key>
  private readonly opened = new Map<string, string>()

  /** `keys[0]` seals; every key opens. Each is `KEY_BYTES` long. */
  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new TypeError('SecretBox: at least one key')
    const derived = keys.map(derive)
    this.current = derived[0]!
    this.byId = new Map(derived.map((k) => [k.id, k]))
  }

  /** The id of the key that seals, as written in every value it seals. */
  get currentKeyId(): string {
    return this.current.id
  }

  /** Ids of every key this box opens with, the current first. */
  get keyIds(): string[] {
    return [...this.byId.keys()]
  }

  seal(context: string, clear: string): string {
    const iv = randomBytes(IV_BYTES)
    const header = `${FORMAT}.${this.current.id}`
    const cipher = createCipheriv('aes-256-gcm', this.current.aead, iv).setAAD(aad(header, context))
    const sealed = Buffer.concat([cipher.update(clear, 'utf8'), cipher.final()])
    return [header, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), sealed.toString('base64url')].join('.')
  }

  /** The clear value. A value written in clear (by a version before sealing, until start-up or `keys rewrap` seals it) is returned as it is. */
  open(context: string, stored: string): string {
    const keyId = sealedKeyId(stored)
    if (keyId === null) return stored
    const memo = `${context}|${stored}`
    const known = this.opened.get(memo)
    if (known !== undefined) return known
    const clear = this.decrypt(context, stored, keyId)
    if (this.opened.size >= MEMO_ENTRIES) this.opened.clear()
    this.opened.set(memo, clear)
    return clear
  }

  private decrypt(context: string, stored: string, keyId: string): string {
    const key = this.byId.get(keyId)
    if (!key) throw new SecretBoxError(`sealed under key ${keyId}, which this process does not hold (it holds ${this.keyIds.join(', ')})`)
    const [, , iv, tag, data] = stored.split('.')
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.aead, Buffer.from(iv!, 'base64url')).setAAD(aad(`${FORMAT}.${keyId}`, context))
      decipher.setAuthTag(Buffer.from(tag!, 'base64url'))
      return Buffer.concat([decipher.update(Buffer.from(data!, 'base64url')), decipher.final()]).toString('utf8')
    } catch {
      throw new SecretBoxError(`sealed value of ${context} does not open under key ${keyId}: altered, or moved from another row`)
    }
  }
}

/** The id of the key a stored value was sealed under, or null for a value still in clear. */
export function sealedKeyId(stored: string): string | null {
  const parts = stored.split('.')
  return parts[0] === FORMAT && parts.length === 5 ? parts[1]! : null
}

// RFC 5869 HKDF-SHA256: one key for sealing and a separate value to name the key by, so the id
// says nothing about the key that seals.
function derive(kek: Buffer): Key {
  if (kek.length !== KEY_BYTES) throw new TypeError(`SecretBox: a key is ${KEY_BYTES} bytes`)
  const aead = Buffer.from(hkdfSync('sha256', kek, '', 'rxtrace secrets aes-256-gcm v1', KEY_BYTES))
  const id = createHmac('sha256', kek).update('rxtrace secrets key id v1').digest().subarray(0, 8).toString('base64url')
  return { id, aead }
}

function aad(header: string, context: string): Buffer {
  return Buffer.from(`${header}|${context}`)
}
