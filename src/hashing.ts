import { hash, randomBytes, timingSafeEqual } from 'node:crypto'
import { configure } from 'safe-stable-stringify'

/*
 * RFC 8785 (JCS) for JSON values: members sorted by their names' UTF-16 code units, no
 * whitespace, numbers and strings as ECMAScript's JSON.stringify writes them. That is
 * safe-stable-stringify's deterministic output; `strict` makes it throw where JCS has no answer
 * (NaN, Infinity, a function or symbol value, a cycle). It costs about a third of the
 * `canonicalize` package's (test/domain/jcs-hash.property.test.ts checks both give the same text).
 */
const stableJson = configure({ deterministic: true, strict: true })

// JSON.stringify writes half of a surrogate pair as an escape (`\udc00`); JCS refuses it. A
// backslash in the text is written doubled, so the escape is the one after an even run of them.
const LONE_SURROGATE_ESCAPE = /(?:^|[^\\])(?:\\\\)*\\ud[89a-f]/

/** The RFC 8785 (JCS) text of `value`. */
function canonicalJson(value: unknown): string {
  const text = stableJson(value)
  if (text === undefined) throw new Error('value cannot be canonicalized')
  if (text.includes('\\ud') && LONE_SURROGATE_ESCAPE.test(text)) throw new Error('a lone surrogate cannot be canonicalized')
  return text
}

/** `sha256:` + lowercase hex of the SHA-256 of the RFC 8785 (JCS) form of `value`. */
export function jcsHash(value: unknown): string {
  return `sha256:${hash('sha256', canonicalJson(value))}`
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
