import Database from 'better-sqlite3'
import { readFileSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { StartupError } from '../startup-error.js'
import { ensurePrivateDataDir, makePrivateDir, type Tightened } from './private-files.js'

/**
 * The data directory at start-up: created private (0700), found writable, and held by this
 * process alone. Every failure is one line naming DATA_DIR (docs/operations.md, Start-up).
 */

/** Creates DATA_DIR (0700) and narrows what is too wide; a directory that cannot be used names the variable. */
export function openDataDir(dir: string): Tightened[] {
  return namingDataDir(dir, () => ensurePrivateDataDir(dir))
}

function namingDataDir<T>(dir: string, step: () => T): T {
  try {
    return step()
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    throw new StartupError(
      `DATA_DIR=${dir}: cannot use it as the data directory (${e.code ?? e.message}${e.path && e.path !== dir ? ` at ${e.path}` : ''}); set DATA_DIR to a directory this user may create and write`,
      { cause: error },
    )
  }
}

/** Who holds a data directory, as the second process to start on it is told. */
type Holder = { pid: number; host: string; since: string; ports?: Record<string, number | null> }

export type DataDirLock = {
  /** Records the ports this process listens on, for the message a second start prints. */
  describe(ports: Record<string, number | null>): void
  release(): void
}

/**
 * Holds DATA_DIR for this process: a second service on the same SQLite stores would interleave
 * two group commits, two reorder windows and two outboxes on one file. The lock is SQLite's own
 * (an exclusive lock on `DATA_DIR/rxtrace.lock`, kept while the connection is open), so the
 * kernel drops it when the process ends, however it ends: no stale lock after a crash. Who holds
 * it is written beside it (`rxtrace.lock.json`) for the message of a start that finds it taken.
 */
export function holdDataDir(dir: string, now: () => Date = () => new Date()): DataDirLock {
  namingDataDir(dir, () => makePrivateDir(dir))
  const lockFile = join(dir, 'rxtrace.lock')
  const holderFile = `${lockFile}.json`
  // timeout 0: a taken lock answers SQLITE_BUSY at once instead of waiting for it.
  const db = new Database(lockFile, { timeout: 0 })
  try {
    db.pragma('locking_mode = EXCLUSIVE')
    // In EXCLUSIVE locking mode the exclusive lock BEGIN EXCLUSIVE takes is kept until close. It
    // writes nothing (no journal either), so a start on a full disk gets past it.
    db.exec('BEGIN EXCLUSIVE; COMMIT')
  } catch (error) {
    db.close()
    if ((error as { code?: string }).code !== 'SQLITE_BUSY') throw error
    throw new StartupError(
      `DATA_DIR=${dir}: in use by another rxtrace process (${describeHolder(holderFile)}); stop it, or give this one its own DATA_DIR`,
    )
  }
  const holder: Holder = { pid: process.pid, host: hostname(), since: now().toISOString() }
  describeHolderIn(holderFile, holder)
  return {
    describe(ports) {
      describeHolderIn(holderFile, { ...holder, ports })
    },
    release() {
      db.close()
    },
  }
}

/** Only for the message of a start that finds the lock taken: a full disk does not stop this one. */
function describeHolderIn(holderFile: string, holder: Holder): void {
  try {
    writeFileSync(holderFile, JSON.stringify(holder))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
  }
}

function describeHolder(holderFile: string): string {
  try {
    const h = JSON.parse(readFileSync(holderFile, 'utf8')) as Holder
    const ports = Object.entries(h.ports ?? {})
      .filter(([, port]) => port !== null)
      .map(([name, port]) => `${name} ${port}`)
    return [`pid ${h.pid} on ${h.host}`, `since ${h.since}`, ...(ports.length ? [`listening on ${ports.join(', ')}`] : [])].join(', ')
  } catch {
    return 'it has not said who it is yet'
  }
}
