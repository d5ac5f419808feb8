import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { startWalCheckpointer, type WalCheckpointer } from '../../src/store/wal-checkpointer.js'

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
  return { file, db }
}

/**
 * Writes back to back (at most `transactions` of them, or for `ms`), the way the readings sink
 * does: each write first lets the worker level the WAL when it has asked to.
 */
async function writeBusily(db: Database.Database, checkpointer: WalCheckpointer, { transactions, ms }: { transactions: number; ms: number }) {
  const insert = db.prepare('INSERT INTO t (body) VALUES (?)')
  const body = 'x'.repeat(1_500) // ten rows dirty about four pages
  let rows = 0
  let levels = 0
  const until = Date.now() + ms
  for (let i = 0; i < transactions && Date.now() < until; i++) {
    if (checkpointer.levelWanted) {
      levels += 1
      await checkpointer.level()
    }
    db.transaction(() => {
      for (let k = 0; k < 10; k++) insert.run(body)
    })()
    rows += 10
    // Lets the worker's messages in, but leaves it no gap in which to catch up by chance.
    await new Promise((resolve) => setImmediate(resolve))
  }
  return { rows, levels }
}

/** Frames now in the WAL, read from another connection without checkpointing anything. */
function walFrames(file: string): number {
  const other = new Database(file)
  try {
    return (other.pragma('wal_checkpoint(NOOP)') as { log: number }[])[0]!.log
  } finally {
    other.close()
  }
}

describe('WAL checkpointer', () => {
  it('lets a busy writer’s WAL start over once it passes levelAtPages, without the writer checkpointing', async () => {
    const { file, db } = openWriter('leveled.db')
    const checkpointer = startWalCheckpointer(file, { levelAtPages: 200, everyMs: 20 })
    const { rows, levels } = await writeBusily(db, checkpointer, { transactions: 3_000, ms: 3_000 })

    expect(levels).toBeGreaterThan(0)
    expect((db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n).toBe(rows)
    // Ten rows put ~7 frames into the WAL; the writer never checkpoints, so without the worker
    // leveling it every one of them would still be there.
    expect(rows).toBeGreaterThan(10_000)
    expect(walFrames(file)).toBeLessThan(rows / 2)

    // And deterministically: one leveling pass with writes paused, and the next commit starts the WAL over.
    const again = startWalCheckpointer(file, { levelAtPages: 200, everyMs: 60_000 })
    await again.level()
    db.prepare('INSERT INTO t (body) VALUES (?)').run('after')
    expect(walFrames(file)).toBeLessThan(10)
    await again.stop()
    await checkpointer.stop()
    db.close()
  })

  it('never leaves a paused writer waiting on a stopped worker', async () => {
    const { file, db } = openWriter('stopped.db')
    const checkpointer = startWalCheckpointer(file, { levelAtPages: 1, everyMs: 10 })
    await checkpointer.stop()
    await expect(checkpointer.level()).resolves.toBeUndefined()
    db.close()
  })
})
