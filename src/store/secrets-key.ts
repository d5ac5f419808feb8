import { randomBytes } from 'node:crypto'
import { linkSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { StartupError } from '../startup-error.js'
import { KEY_BYTES, SecretBox } from './secret-box.js'

/** The key file made on a first start with neither SECRETS_KEY nor SECRETS_KEY_FILE (SQLite only). */
const GENERATED_KEY_FILE = 'secrets.key'

// 32 bytes are 43 base64 characters and one `=` (optional; base64url has none).
const KEY_TEXT = /^[A-Za-z0-9+/_-]{43}=?$/

/** One key from its base64 (or base64url) text, or null when it is not 32 bytes so written. */
export function parseKey(text: string): Buffer | null {
  const trimmed = text.trim()
  if (!KEY_TEXT.test(trimmed)) return null
  const key = Buffer.from(trimmed, trimmed.includes('-') || trimmed.includes('_') ? 'base64url' : 'base64')
  return key.length === KEY_BYTES ? key : null
}

export type SecretsKeySettings = {
  SECRETS_KEY?: Buffer | undefined
  SECRETS_KEY_PREVIOUS?: Buffer[] | undefined
  SECRETS_KEY_FILE?: string | undefined
  DATA_DIR: string
  DATABASE_URL?: string | undefined
}

/** The keys and where they came from: `origin` is what a start-up error tells the operator to look at. */
export type SecretsKeys = { box: SecretBox; origin: string; generated: string | null }

/**
 * The key-encryption keys, the current one first: SECRETS_KEY (and SECRETS_KEY_PREVIOUS), else
 * the lines of SECRETS_KEY_FILE, else DATA_DIR's generated key file, made now on a first start.
 * The configuration already refused DATABASE_URL without a key: copies sharing a database must
 * share the key, which one generated per copy would not be.
 */
export function loadSecretsKeys(settings: SecretsKeySettings): SecretsKeys {
  if (settings.SECRETS_KEY)
    return { box: new SecretBox([settings.SECRETS_KEY, ...(settings.SECRETS_KEY_PREVIOUS ?? [])]), origin: 'SECRETS_KEY', generated: null }
  if (settings.SECRETS_KEY_FILE) {
    const origin = `SECRETS_KEY_FILE=${settings.SECRETS_KEY_FILE}`
    return { box: new SecretBox(readKeyFile(settings.SECRETS_KEY_FILE, origin)), origin, generated: null }
  }
  if (settings.DATABASE_URL) throw new StartupError('SECRETS_KEY: required with DATABASE_URL; give every copy the same key')
  const file = join(settings.DATA_DIR, GENERATED_KEY_FILE)
  const origin = `the key file ${file} (SECRETS_KEY unset)`
  const generated = generateKeyFile(file) ? file : null
  return { box: new SecretBox(readKeyFile(file, origin)), origin, generated }
}

/** One base64 key a line, the current first; blank lines and `#` comments are skipped. */
function readKeyFile(file: string, origin: string): Buffer[] {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new StartupError(`${origin}: cannot read it (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
  const keys: Buffer[] = []
  for (const [index, line] of text.split('\n').entries()) {
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue
    const key = parseKey(line)
    if (!key)
      throw new StartupError(`${origin}: line ${index + 1} is not a key (32 random bytes in base64, e.g. from \`openssl rand -base64 32\`)`)
    keys.push(key)
  }
  if (keys.length === 0) throw new StartupError(`${origin}: holds no key`)
  return keys
}

/**
 * Writes a new key into `file` unless it exists; true when this call made it. Written to a
 * temporary name, then linked into place: two processes starting at once on one DATA_DIR both
 * end up reading the one key that won, never a half-written file.
 */
function generateKeyFile(file: string): boolean {
  try {
    statSync(file)
    return false
  } catch {
    /* missing: make it */
  }
  const temporary = `${file}.${randomBytes(6).toString('hex')}.tmp`
  const text = [
    '# rxtrace key-encryption key: it opens the signing keys and webhook secrets in the store.',
    '# Keep a copy apart from the database and its backups; without it they cannot be opened.',
    randomBytes(KEY_BYTES).toString('base64'),
    '',
  ].join('\n')
  writeFileSync(temporary, text, { mode: 0o600, flag: 'wx' })
  try {
    linkSync(temporary, file)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    unlinkSync(temporary)
  }
}
