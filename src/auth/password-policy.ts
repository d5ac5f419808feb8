import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from './passwords.js'

/**
 * What a new password may not be (NIST SP 800-63B §5.1.1.2): too short or too long, on a list of
 * common and breached passwords, or made of words an attacker tries first for this account (the
 * name of its email address, the service's name). Checked wherever a password is set: the users
 * API, the CLI and the setup page.
 */

/** The service's name, which NIST names as a context-specific word to refuse. */
const SERVICE_NAME = 'rxtrace'
// Pieces of the email's name shorter than this are not looked for: "pat" would refuse "compatible".
const MIN_NAME_PIECE = 4
// A list word shorter than this, left once digits and symbols are stripped, is not refused: the
// list holds short words ("love", "abc") that a long passphrase may well end with.
const MIN_LISTED_CORE = 4

let common: Promise<ReadonlySet<string>> | undefined

/**
 * The ~49,000 most common passwords of public breach corpora, as @zxcvbn-ts/language-common ships
 * them (lower case). Loaded on first use, about 0.3 s once per process, rather than at every start
 * of the service and the CLI: only setting a password needs it.
 */
function commonPasswords(): Promise<ReadonlySet<string>> {
  common ??= import('@zxcvbn-ts/language-common').then(({ dictionary }) => new Set(dictionary['passwords-common']))
  return common
}

/** Why `password` may not be set for the account with this email, in words after "The password …"; null when it may. */
export async function passwordProblem(password: string, { email }: { email: string }): Promise<string | null> {
  if (password.length < MIN_PASSWORD_LENGTH || password.length > MAX_PASSWORD_LENGTH)
    return `must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`
  const folded = password.normalize('NFKC').toLowerCase()
  const list = await commonPasswords()
  // A listed password with digits or symbols around it ("Password1234!") is as guessable as the password.
  const core = folded.replace(/^[\d\W_]+|[\d\W_]+$/g, '')
  if (list.has(folded) || (core.length >= MIN_LISTED_CORE && list.has(core)))
    return 'is too common: it is on a list of common and breached passwords'
  if (/^(.+?)\1+$/su.test(folded)) return 'repeats one short piece over and over'
  if (folded.replace(/[\s._-]/g, '').includes(SERVICE_NAME)) return `contains the service’s name (${SERVICE_NAME})`
  const name = email.toLowerCase().split('@')[0] ?? ''
  const pieces = [name, ...name.split(/[._+-]/)].filter((p) => p.length >= MIN_NAME_PIECE)
  if (pieces.some((p) => folded.includes(p))) return 'contains the name of your email address'
  return null
}
