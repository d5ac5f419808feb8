import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

/**
 * Seals a tote's password for the short while it waits for the broker (broker-accounts.ts):
 * AES-256-GCM under a key derived (HKDF-SHA256, RFC 5869) from the service's own broker
 * password. That key lives only in `MQTT_URL`, never in the database, so a copy of the database
 * alone opens no sealed password; and whoever holds `MQTT_URL` can create broker accounts anyway.
 */
export class PasswordSeal {
  private readonly key: Buffer

  constructor(secret: string) {
    this.key = Buffer.from(hkdfSync('sha256', secret, 'rxtrace', 'rxtrace broker account password seal v1', 32))
  }

  /** `v1.<iv>.<tag>.<ciphertext>`, base64url; bound to `toteId` (associated data) so a sealed value cannot be moved to another tote. */
  seal(toteId: string, password: string): string {
    const iv = randomBytes(12) // NIST SP 800-38D §8.2: 96-bit random IVs
    const cipher = createCipheriv('aes-256-gcm', this.key, iv).setAAD(Buffer.from(toteId))
    const sealed = Buffer.concat([cipher.update(password, 'utf8'), cipher.final()])
    return ['v1', iv, cipher.getAuthTag(), sealed].map((part) => (typeof part === 'string' ? part : part.toString('base64url'))).join('.')
  }

  /** The password, or an error when the value was sealed under another key (the broker password changed) or altered. */
  open(toteId: string, sealed: string): string {
    const [version, iv, tag, data] = sealed.split('.')
    if (version !== 'v1' || !iv || !tag || data === undefined) throw new Error('not a sealed password')
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url')).setAAD(Buffer.from(toteId))
    decipher.setAuthTag(Buffer.from(tag, 'base64url'))
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8')
  }
}
