import { execFileSync } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, rmdirSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * A real full disk: a small tmpfs mounted on a new directory. Mounting needs root (or
 * CAP_SYS_ADMIN); without it `mounted` is false and the reason is printed, for a skipIf.
 */
export function smallDisk(prefix: string, size: string, what: string): { dir: string; mounted: boolean; unmount(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' })
  } catch (error) {
    console.warn(`Skipping ${what}: cannot mount a tmpfs (${String((error as Error).message).split('\n')[0]})`)
    rmdirSync(dir)
    return { dir, mounted: false, unmount() {} }
  }
  return {
    dir,
    mounted: true,
    unmount() {
      execFileSync('umount', [dir])
      rmdirSync(dir)
    },
  }
}

/** Writes zeros into `file` until the filesystem refuses (ENOSPC). */
export function fillUp(file: string): void {
  const fd = openSync(file, 'w')
  const chunk = Buffer.alloc(64 * 1024)
  try {
    for (;;) writeSync(fd, chunk)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
  } finally {
    closeSync(fd)
  }
}
