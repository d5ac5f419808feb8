import { hash, randomBytes, timingSafeEqual } from 'node:crypto'
import canonicalize from 'canonicalize'

/** `sha256:` + lowercase hex of the SHA-256 of the RFC 8785 (JCS) form of `value`. */
export function jcsHash(value: unknown): string {
  const canonical = canonicalize(value)
  if (canonical === undefined) throw new Error('value cannot be canonicalized')
  return `sha256:${hash('sha256', canonical)}`
}

// crypto.hash is the one-shot form: a third of createHash().update().digest()'s cost on short inputs.
export function sha256Hex(text: string | Buffer): string {
  return hash('sha256', text)
}

/**
 * Secrets we generate carry 256 bits of entropy, so one SHA-256 is a sound verifier for them
 * (as for GitHub tokens): a slow KDF protects low-entropy passwords, which we never accept.
 */
export function hashSecret(secret: string): string {
  return sha256Hex(secret)
}

export function secretMatches(secret: string, storedHash: string | null | undefined): boolean {
  if (!storedHash) return false
  const a = Buffer.from(hashSecret(secret), 'hex')
  const b = Buffer.from(storedHash, 'hex')
  return a.length === b.length && timingSafeEqual(a, b)
}

export function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`
}
