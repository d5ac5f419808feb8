import { statfsSync } from 'node:fs'

/**
 * Readiness of the disk under `DATA_DIR`: SQLite refuses writes (SQLITE_FULL) once the
 * filesystem is full, and the WAL of a busy readings file grows by many MiB a second, so "ready"
 * means some room is left, not merely that the files can be read. Counts the blocks available to
 * this (unprivileged) process, not those reserved for root.
 *
 * Synchronous on purpose: a local statfs takes microseconds, and a probe answered on the
 * threadpool could miss `/readyz`'s deadline behind a busy event loop and report a healthy disk
 * as timed out.
 */
export function diskSpaceCheck(dir: string, minFreeBytes: number): () => Promise<void> {
  return async () => {
    const { bavail, bsize } = statfsSync(dir)
    const free = bavail * bsize
    if (free < minFreeBytes) {
      throw Object.assign(new Error(`${dir} has ${free} bytes free, below the ${minFreeBytes} required`), { state: 'full' })
    }
  }
}
