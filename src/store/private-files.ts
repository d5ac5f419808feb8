import { accessSync, chmodSync, closeSync, constants, existsSync, mkdirSync, openSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

/**
 * The data directory holds the entity store (with the token signing keys and every hashed
 * secret) and the readings: only the service's user may open it or anything in it.
 */
const PRIVATE_DIR_MODE = 0o700
const PRIVATE_FILE_MODE = 0o600

/** A path whose permissions were wider than ours, for the start-up log: narrowed, or not ours to change. */
export type Tightened = { path: string; was: string; narrowed: boolean }

const octal = (mode: number) => `0${(mode & 0o777).toString(8)}`
const widerThan = (mode: number, allowed: number) => (mode & 0o777 & ~allowed) !== 0

/**
 * Creates `dir` (and its missing parents) as 0700. An existing directory with wider permissions
 * is narrowed to 0700, and so is every file directly in it to 0600: a data directory made by an
 * earlier version, or by hand, becomes what this version would have made. What was too wide is
 * returned so the caller can say so; a path we may not chmod (not ours) is left as it is.
 */
export function ensurePrivateDataDir(dir: string): Tightened[] {
  makePrivateDir(dir)
  const tightened: Tightened[] = []
  narrow(dir, PRIVATE_DIR_MODE, tightened)
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isFile()) narrow(join(dir, entry.name), PRIVATE_FILE_MODE, tightened)
  }
  return tightened
}

/**
 * `mkdir -p` with 0700 for what it creates, one level at a time: Node 20's
 * `mkdirSync(…, { recursive: true })` never returns for a path it cannot create under some
 * filesystems (`/proc/x` spins at 100 % CPU); this throws the first level's error (ENOENT,
 * EACCES, ENOTDIR, EROFS) instead. Then the directory must be writable: found now, by name,
 * rather than as the first store file that fails to open.
 */
export function makePrivateDir(dir: string): void {
  const missing: string[] = []
  for (let at = resolve(dir); !existsSync(at); at = dirname(at)) {
    missing.unshift(at)
    if (dirname(at) === at) break
  }
  for (const level of missing) mkdirSync(level, { mode: PRIVATE_DIR_MODE })
  accessSync(dir, constants.W_OK | constants.X_OK)
}

/**
 * Creates a SQLite database file as 0600 before SQLite opens it. SQLite creates the `-wal`,
 * `-shm` and `-journal` files beside it with the database file's own permissions, so those
 * follow (SQLite's unix VFS: `findCreateFileMode`, `unixOpenSharedMemory`).
 */
export function createPrivateFile(file: string): void {
  if (file === ':memory:' || file === '') return
  // `a`: create when missing, never truncate; the mode applies only to a file created here.
  closeSync(openSync(file, 'a', PRIVATE_FILE_MODE))
  narrow(file, PRIVATE_FILE_MODE, [])
}

function narrow(path: string, allowed: number, tightened: Tightened[]): void {
  const { mode } = statSync(path)
  if (!widerThan(mode, allowed)) return
  try {
    chmodSync(path, mode & allowed)
    tightened.push({ path, was: octal(mode), narrowed: true })
  } catch {
    // Not ours to change (EPERM): the files we create inside are private all the same.
    tightened.push({ path, was: octal(mode), narrowed: false })
  }
}
