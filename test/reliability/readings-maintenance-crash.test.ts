import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, unlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import type { ReadingRow } from '../../src/timeseries/sink.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { readingRow } from '../helpers/reading-row.js'
import { fillUp, smallDisk } from '../helpers/tmpfs.js'

/**
 * Faults in the readings file's own maintenance (docs/operations.md, Readings storage): a
 * SIGKILL in the middle of compaction or of an expiry batch, and a full disk during compaction,
 * over a real SQLite file. Each pass is one transaction, so what a kill or a failed write leaves
 * is the file as of the last committed pass: every reading in exactly one place, readable.
 */

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
const WORKER = fileURLToPath(new URL('./readings-maintenance-worker.ts', import.meta.url))
const D0 = Date.UTC(2025, 0, 6)
const MIN = 60_000
const TOTES = 12
const LATER = Date.UTC(2100, 0, 1)

const dir = mkdtempSync(join(tmpdir(), 'rxtrace-maintenance-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Three days of 12 totes once a minute; odd totes bound to one delivery each (dl_<n>) for the whole time. */
function history(): ReadingRow[] {
  return Array.from({ length: TOTES * 3 * 1440 }, (_, i) => {
    const tote = i % TOTES
    const ts = D0 + Math.floor(i / TOTES) * MIN + tote
    const delivery = tote % 2 === 1 ? `dl_${tote}` : null
    return readingRow({
      tote_id: `tt_${tote}`,
      ts,
      delivery_id: delivery,
      rx_id: delivery && `rx_${tote}`,
      temp_c: 3 + (i % 40) / 10,
      seq: i,
    })
  })
}
const rows = history()
const ofTote = (n: number) => rows.filter((r) => r.tote_id === `tt_${n}`)

async function seeded(name: string): Promise<string> {
  const path = join(dir, name)
  const sink = createSqliteSink({ path, compaction: false })
  await sink.write(rows)
  await sink.close()
  return path
}

/** Runs the worker and SIGKILLs it as soon as it has printed `afterPasses` passes. */
function killMidway(
  mode: 'compact' | 'expire',
  path: string,
  afterPasses: number,
  keep = '',
): Promise<{ passes: number; signal: string | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER, mode, path, keep], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let passes = 0
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      passes += text.split('\n').filter((l) => l.startsWith('pass')).length
      if (passes >= afterPasses) child.kill('SIGKILL')
    })
    child.once('error', reject)
    child.once('exit', (_code, signal) => resolve({ passes, signal }))
  })
}

describe('SIGKILL in the middle of readings maintenance', () => {
  it('leaves a half-compacted file with every reading once, readable, and compaction finishes after a restart', async () => {
    const path = await seeded('compact.db')
    const { signal } = await killMidway('compact', path, 20)
    expect(signal).toBe('SIGKILL')
    const sink = createSqliteSink({ path, compaction: false })
    try {
      expect(await sink.count()).toBe(rows.length)
      for (let t = 0; t < TOTES; t++) expect(await sink.readingsForTote(`tt_${t}`, 0, Infinity)).toEqual(ofTote(t))
      expect(await sink.readingsForDelivery('dl_3', 0, Infinity)).toEqual(ofTote(3))
      while ((await sink.compact({ nowMs: LATER })).more);
      expect(await sink.count()).toBe(rows.length)
      expect(await sink.readingsForTote('tt_4', 0, Infinity)).toEqual(ofTote(4))
    } finally {
      await sink.close()
    }
  })

  for (const compacted of [false, true]) {
    it(`leaves ${compacted ? 'compacted days' : 'row tables'} consistent when killed in an expiry batch, and never takes a kept delivery's reading`, async () => {
      const path = await seeded(`expire-${compacted}.db`)
      if (compacted) {
        const sink = createSqliteSink({ path, compaction: false })
        while ((await sink.compact({ nowMs: LATER })).more);
        await sink.close()
      }
      // Everything is past retention except what is kept: dl_1 and dl_5 (open, or inside their retention).
      const { signal } = await killMidway('expire', path, 5, 'dl_1,dl_5')
      expect(signal).toBe('SIGKILL')
      const sink = createSqliteSink({ path, compaction: false })
      try {
        let total = 0
        for (let t = 0; t < TOTES; t++) {
          const left = await sink.readingsForTote(`tt_${t}`, 0, Infinity)
          total += left.length
          // Whatever is left of a tote is a suffix or subset of what was written, each reading once, unchanged.
          const written = new Map(ofTote(t).map((r) => [r.ts, r]))
          expect(new Set(left.map((r) => r.ts)).size).toBe(left.length)
          for (const r of left) expect(r).toEqual(written.get(r.ts))
        }
        expect(await sink.count()).toBe(total)
        expect(await sink.readingsForDelivery('dl_1', 0, Infinity)).toEqual(ofTote(1))
        expect(await sink.readingsForDelivery('dl_5', 0, Infinity)).toEqual(ofTote(5))
        for (;;) {
          const pass = await sink.expire!({
            unboundBeforeMs: LATER,
            boundBeforeMs: LATER,
            keepDeliveries: new Set(['dl_1', 'dl_5']),
            limit: 5_000,
          })
          if (!pass.more) break
        }
        expect(await sink.count()).toBe(2 * 3 * 1440)
        expect(await sink.readingsForDelivery('dl_5', 0, Infinity)).toEqual(ofTote(5))
      } finally {
        await sink.close()
      }
    })
  }
})

// A real full disk: a tmpfs as the readings file's directory.
const disk = smallDisk('rxtrace-full-compaction-', '16m', 'the full-disk compaction test')
const small = disk.dir

describe.skipIf(!disk.mounted)('a full disk during compaction', () => {
  afterAll(() => disk.unmount())

  it('fails the pass, leaves the old rows readable, and compacts once space is back', async () => {
    const path = join(small, 'readings.db')
    let sink = createSqliteSink({ path, compaction: false })
    await sink.write(rows)
    await sink.close() // the WAL is checkpointed and removed: compaction must grow it again
    sink = createSqliteSink({ path, compaction: false })
    const filler = join(small, 'filler')
    fillUp(filler)
    await expect(
      (async () => {
        while ((await sink.compact({ nowMs: LATER, maxReadings: 20_000 })).more);
      })(),
    ).rejects.toMatchObject({ code: expect.stringMatching(/SQLITE_FULL|SQLITE_IOERR/) })
    expect(await sink.count()).toBe(rows.length)
    expect(await sink.readingsForTote('tt_7', 0, Infinity)).toEqual(ofTote(7))
    await sink.close().catch(() => undefined)

    unlinkSync(filler)
    sink = createSqliteSink({ path, compaction: false })
    try {
      expect(await sink.readingsForTote('tt_2', 0, Infinity)).toEqual(ofTote(2))
      while ((await sink.compact({ nowMs: LATER })).more);
      expect(await sink.count()).toBe(rows.length)
      expect(await sink.readingsForDelivery('dl_7', 0, Infinity)).toEqual(ofTote(7))
    } finally {
      await sink.close()
    }
  })
})
