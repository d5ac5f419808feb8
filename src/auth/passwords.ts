import { randomBytes, timingSafeEqual } from 'node:crypto'
import { HashingThread, type HashPriority } from './hashing-thread.js'

/**
 * Password hashing with scrypt (RFC 7914) from node:crypto: memory-hard, no native dependency,
 * and run on a thread of its own at a lower priority (hashing-thread.ts), so a sign-in never
 * blocks the event loop nor takes a core from it.
 *
 * Parameters: N = 2^15, r = 8, p = 3, a 16-byte salt, a 32-byte key. That is one of OWASP's
 * equivalent scrypt settings (Password Storage Cheat Sheet: N=2^17 r=8 p=1 … N=2^13 r=8 p=10):
 * 32 MiB per hash (128 · N · r bytes; one hash at a time, see below), and p = 3 buys back the
 * work a larger N would have cost.
 * The parameters are stored with each hash, so raising them later only affects new passwords.
 */
export type ScryptParams = { log2N: number; r: number; p: number }
export const DEFAULT_SCRYPT: ScryptParams = { log2N: 15, r: 8, p: 3 }

const SALT_BYTES = 16
const KEY_BYTES = 32
/** RFC 7914 §2: at least 8 characters is common; we ask for 12 (NIST SP 800-63B allows any ≥ 8). */
export const MIN_PASSWORD_LENGTH = 12
/** Long enough for any passphrase, short enough that hashing cannot be used to burn CPU. */
export const MAX_PASSWORD_LENGTH = 256

/**
 * One hash at a time per process, on one low-priority thread: each takes ~0.1-0.4 s of a core,
 * and libuv's four threads would otherwise run four at once and take every core of a small
 * machine from the event loop, so a burst of sign-ins would delay every PUBACK and request.
 * Sign-ins queue instead (the per-account and per-address throttles bound how long the queue can get).
 */
const hashing = new HashingThread()
/**
 * A signature's hash runs on a thread of its own, at normal priority: a pharmacist is waiting at
 * the signing dialog, and neither a burst of sign-ins queued on the thread above nor its low
 * priority may make them wait (docs/performance.md, Signed dispositions). Signatures are rare
 * (a person's decision, throttled per account), so this thread seldom takes a core.
 */
const SIGNING_NICE = 0
const signing = new HashingThread(SIGNING_NICE)

function derive(password: string, salt: Buffer, { log2N, r, p }: ScryptParams, priority?: HashPriority): Promise<Buffer> {
  const N = 2 ** log2N
  // node refuses to allocate more than maxmem; 128·N·r is what scrypt needs, plus headroom.
  return (priority === 'signature' ? signing : hashing).scrypt(
    { password: password.normalize('NFKC'), salt, keyBytes: KEY_BYTES, N, r, p, maxmem: 128 * N * r * 2 },
    priority,
  )
}

export class PasswordHasher {
  /** scrypt derivations run so far (hashes and checks): what an unknown account must cost as much of as a known one. */
  derivations = 0
  // Random salt and key in the stored format: checking against it costs one derivation like any
  // other, and making it costs none (hashing it on first use would make that one attempt slower).
  private readonly dummy: string

  constructor(private readonly params: ScryptParams = DEFAULT_SCRYPT) {
    const { log2N, r, p } = params
    this.dummy = `scrypt$${log2N}$${r}$${p}$${randomBytes(SALT_BYTES).toString('base64url')}$${randomBytes(KEY_BYTES).toString('base64url')}`
  }

  async hash(password: string): Promise<string> {
    const salt = randomBytes(SALT_BYTES)
    this.derivations++
    const key = await derive(password, salt, this.params)
    const { log2N, r, p } = this.params
    return `scrypt$${log2N}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`
  }

  /**
   * True when `password` matches `stored`. With no stored hash (an unknown account, or a user who
   * has not set a password yet) it still runs scrypt, with this hasher's parameters, against a
   * dummy hash, so the answer takes as long either way and timing does not tell which accounts exist.
   */
  async verify(password: string, stored: string | null | undefined, priority?: HashPriority): Promise<boolean> {
    if (!stored) {
      await this.check(password, this.dummy, priority)
      return false
    }
    return this.check(password, stored, priority)
  }

  private async check(password: string, stored: string, priority?: HashPriority): Promise<boolean> {
    const parts = stored.split('$')
    if (parts.length !== 6 || parts[0] !== 'scrypt') return false
    const [, log2N, r, p, salt, key] = parts as [string, string, string, string, string, string]
    const expected = Buffer.from(key, 'base64url')
    this.derivations++
    const actual = await derive(
      password.slice(0, MAX_PASSWORD_LENGTH),
      Buffer.from(salt, 'base64url'),
      {
        log2N: Number(log2N),
        r: Number(r),
        p: Number(p),
      },
      priority,
    )
    return actual.length === expected.length && timingSafeEqual(actual, expected)
  }
}
