import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { afterAll, describe, expect, it } from 'vitest'
import { startTestService } from '../helpers/service.js'

/**
 * The SQLite page cache is the one part of the service's memory that grows with what is stored
 * (large idempotent answers fill it) and keeps what it took: SQLITE_CACHE_MIB bounds it.
 */
describe('SQLite page cache', () => {
  const dirs: string[] = []
  afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))

  const cacheOf = async (env: Record<string, string>) => {
    const dir = mkdtempSync(join(tmpdir(), 'rxtrace-cache-'))
    dirs.push(dir)
    const api = await startTestService({ DATA_DIR: dir, ...env }, { store: { kind: 'sqlite', file: join(dir, 'rxtrace.db') } })
    try {
      const { rows } = await sql<{ cache_size: number }>`pragma cache_size`.execute(api.service.db)
      return rows[0]!.cache_size
    } finally {
      await api.stop()
    }
  }

  it('is 64 MiB by default and SQLITE_CACHE_MIB sets it', async () => {
    expect(await cacheOf({})).toBe(-64 * 1024) // negative: KiB
    expect(await cacheOf({ SQLITE_CACHE_MIB: '8' })).toBe(-8 * 1024)
  })

  it('refuses a cache too small to hold a create’s pages', async () => {
    await expect(cacheOf({ SQLITE_CACHE_MIB: '1' })).rejects.toThrow(/SQLITE_CACHE_MIB/)
  })
})
