import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { startWalCheckpointer } from '../../src/store/wal-checkpointer.js'

const dir = mkdtempSync(join(tmpdir(), 'rxtrace-wal-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A writer that never checkpoints itself, so only the worker can let its WAL start over. */
function openWriter(name: string) {
  const file = join(dir, name)
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.pragma('wal_autocheckpoint = 0')
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)')
  const insert = db.prepare('INSERT INTO t (body) VALUES (?)')
  const writeTen = db.transaction(() => {
    for (let k = 0; k < 10; k++) insert.run('x'.repeat(200))
  })
  return { file, db, writeTen }
}

/** The WAL as another connection sees it, without checkpointing anything. */
function walOf(file: string): { log: number; checkpointed: number } {
  const other = new Database(file)
  try {
    return (other.pragma('wal_checkpoint(NOOP)') as { log: number; checkpointed: number }[])[0]!
  } finally {
    other.close()
  }
}

describe('WAL checkpointer', () => {
  it('lets a busy writer’s WAL start over once it passes levelAtPages, without the writer checkpointing', async () => {
    const { file, db, writeTen } = openWriter('leveled.db')
    const checkpointer = startWalCheckpointer(file, { levelAtPages: 200, everyMs: 20, levelTimeoutMs: 10_000 })
    const observer = new Database(file)
    const frames = () => (observer.pragma('wal_checkpoint(NOOP)') as { log: number }[])[0]!.log
    // Back to back, as the readings sink under load: each write first lets the worker level
    // the WAL when it has asked to. A WAL that shrinks has started over. Only restarts after a
    // paused pass count: on a busy machine this writer is slow enough that now and then a
    // routine pass catches up by itself, which proves nothing about the paused pass.
    let rows = 0
    let levels = 0
    let restarts = 0
    let before = 0
    let leveled = false
    const until = Date.now() + 15_000
    for (let i = 0; i < 20_000 && restarts < 2 && Date.now() < until; i++) {
      if (checkpointer.levelWanted) {
        levels += 1
        await checkpointer.level()
        leveled = true
      }
      writeTen()
      rows += 10
      const now = frames()
      if (now < before && leveled) {
        restarts += 1
        leveled = false
      }
      before = now
      await new Promise((resolve) => setImmediate(resolve))
    }
    observer.close()
    await checkpointer.stop()

    // Without the paused pass, the worker's passes run while the writer commits and never end
    // level: the WAL would still hold every frame (checked by skipping that pass: no restart).
    expect(restarts).toBe(2)
    expect(levels).toBeGreaterThanOrEqual(2)
    expect((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n).toBe(rows)
    db.close()
  })

  it('level() waits for a pass that leaves nothing in the WAL to copy, so the next commit starts it over', async () => {
    const { file, db, writeTen } = openWriter('paused.db')
    for (let i = 0; i < 100; i++) writeTen()
    expect(walOf(file).checkpointed).toBe(0) // nothing has checkpointed it

    const checkpointer = startWalCheckpointer(file, { levelAtPages: 200, everyMs: 60_000, levelTimeoutMs: 10_000 })
    await checkpointer.level()
    const wal = walOf(file)
    expect(wal.log).toBeGreaterThan(100)
    expect(wal.checkpointed).toBe(wal.log)
    writeTen()
    expect(walOf(file).log).toBeLessThan(10)
    await checkpointer.stop()
    db.close()
  })

  it('says it is behind while the WAL is past levelAtPages, until a paused pass levels it', async () => {
    const { file, db, writeTen } = openWriter('behind.db')
    const checkpointer = startWalCheckpointer(file, { levelAtPages: 50, everyMs: 20, levelTimeoutMs: 10_000 })
    const until = async (wanted: boolean) => {
      for (const stop = Date.now() + 10_000; checkpointer.behind !== wanted && Date.now() < stop;) {
        writeTen() // the writer goes on, so no pass ends level by itself
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      return checkpointer.behind
    }
    expect(checkpointer.behind).toBe(false)
    for (let i = 0; i < 20; i++) writeTen() // ~60 pages: past the mark
    expect(await until(true)).toBe(true)
    await checkpointer.level()
    expect(checkpointer.behind).toBe(false) // the next commit starts the WAL over
    writeTen()
    expect(walOf(file).log).toBeLessThan(50)
    await new Promise((resolve) => setTimeout(resolve, 100)) // passes that find the WAL short keep it so
    expect(checkpointer.behind).toBe(false)
    await checkpointer.stop()
    db.close()
  })

  it('never leaves a paused writer waiting on a stopped worker', async () => {
    const { file, db } = openWriter('stopped.db')
    // A level() that waited for the worker would wait out this timeout, far past the test's own.
    const checkpointer = startWalCheckpointer(file, { levelAtPages: 1, everyMs: 10, levelTimeoutMs: 600_000 })
    await checkpointer.stop()
    await expect(checkpointer.level()).resolves.toBeUndefined()
    db.close()
  })
})
