import type { Clock } from '../clock.js'
import type { SignatureMeaning } from '../domain/e-signature.js'
import { AppError } from '../errors.js'
import type { Db } from '../store/schema.js'
import type { PasswordHasher } from './passwords.js'
import type { Principal } from './scopes.js'
import type { SignInThrottle } from './sign-in-throttle.js'

/** RFC 9470 §3 / OIDC `max_age`: a signature without a password needs a sign-in at most this recent. */
const SIGNATURE_MAX_AGE_S = 300

/** What a request asks to sign with; the password is dropped as soon as it is checked. */
export type SignatureRequest = { meaning: SignatureMeaning; password?: string | undefined }

/** Who signed, and how they proved it at that moment: what the stored signature records. */
export type Signer = { id: string; name: string; email: string; meaning: SignatureMeaning; method: 'password' | 'recent_sign_in' }

/**
 * Checks the person behind a signature at the moment of signing (21 CFR 11.200(a)(1)): only a
 * person's token may sign; with a password, it is checked again off the event loop (scrypt on
 * the hashing thread) and failures are throttled with the same counter as sign-in
 * (`account:<email>`, shared across copies on PostgreSQL); without one, the token's `auth_time`
 * must be at most 300 s old, else the RFC 9470 step-up challenge. A disabled user never signs.
 * Steps: person → meaning → standing → throttle → password or recent sign-in.
 */
export class SignatureAuthority {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly passwords: PasswordHasher,
    private readonly throttle: SignInThrottle,
  ) {}

  async authenticate(principal: Principal, request: SignatureRequest, expected: SignatureMeaning): Promise<Signer> {
    // A client acting for itself has no person behind it to sign (21 CFR 11.100(a): unique to one individual).
    if (!principal.sub.startsWith('us_'))
      throw new AppError(
        'signature_required_person',
        'Only a person signed in with their own account can sign; this token is a machine client’s.',
      )
    if (request.meaning !== expected)
      throw new AppError('validation_failed', `This record is signed with the meaning "${expected}".`, {
        errors: [{ pointer: '/signature/meaning', message: `must be "${expected}" for this record` }],
      })
    const user = await this.db
      .selectFrom('users')
      .select(['id', 'name', 'email', 'disabled', 'password_hash'])
      .where('id', '=', principal.sub)
      .executeTakeFirst()
    if (!user || user.disabled) throw signatureFailed('This account is disabled and cannot sign.')
    const signer = { id: user.id, name: user.name, email: user.email, meaning: request.meaning }
    if (request.password === undefined) return { ...signer, method: this.recentSignIn(principal) }

    const keys = [`account:${user.email}`]
    const waitMs = await this.throttle.waitMs(keys)
    if (waitMs > 0)
      throw new AppError(
        'rate_limited',
        'Too many wrong passwords for this account; wait before signing again.',
        {},
        { 'Retry-After': String(Math.ceil(waitMs / 1_000)) },
      )
    // Ahead of queued sign-ins on the hashing thread: the person is waiting at the signing dialog.
    if (!(await this.passwords.verify(request.password, user.password_hash, 'signature'))) {
      await this.throttle.fail(keys)
      throw signatureFailed('The password is not correct; nothing was signed or changed.')
    }
    await this.throttle.succeed(keys[0]!)
    return { ...signer, method: 'password' }
  }

  /** RFC 9470 §3: accepted when the token's auth_time is recent enough, else the step-up challenge. */
  private recentSignIn(principal: Principal): 'recent_sign_in' {
    const ageS = this.clock.now() / 1_000 - (principal.authTime ?? Number.NEGATIVE_INFINITY)
    if (ageS <= SIGNATURE_MAX_AGE_S) return 'recent_sign_in'
    throw new AppError(
      'insufficient_user_authentication',
      `Signing without a password needs a sign-in within the last ${SIGNATURE_MAX_AGE_S} s: send the password, or sign in again (max_age=${SIGNATURE_MAX_AGE_S}).`,
      {},
      { 'WWW-Authenticate': `Bearer error="insufficient_user_authentication", max_age=${SIGNATURE_MAX_AGE_S}` },
    )
  }
}

const signatureFailed = (detail: string) => new AppError('signature_failed', detail)
