/**
 * `npm run bench:storage` — bytes on disk per stored reading in the SQLite readings file.
 *
 * Writes a realistic mixed load (test/bench/lib/reading-load.ts: many totes once a minute, a few
 * once a second, two in three bound to deliveries) straight through the sink's `write()` into a
 * fresh file, closes it (the WAL checkpointed into the file and removed), and divides the file's
 * size by the readings stored. Then, if the sink compacts, compacts every day that has ended and
 * measures again. With `--compact-as-it-goes` each day is compacted once event time has passed
 * its end, as the running service does, so the size as written is that of a store in steady
 * state (free pages of compacted days reused by the next). One JSON object on stdout, progress on
 * stderr.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { parseBenchArgs } from './lib/args.js'
import { round } from './lib/ingest-stats.js'
import { readingBatches } from './lib/reading-load.js'
import { sqlitePages } from './lib/sqlite-pages.js'

const opts = parseBenchArgs(
  'bench:storage',
  'Bytes per stored reading in the SQLite readings file after a realistic mixed load. Prints one JSON object on stdout, progress on stderr.',
  {
    'slow-totes': { type: 'string', default: '2000' },
    'fast-totes': { type: 'string', default: '20' },
    hours: { type: 'string', default: '6' },
    keep: { type: 'boolean', default: false },
    'compact-as-it-goes': { type: 'boolean', default: false },
  },
  {
    'slow-totes': 'totes reporting once a minute',
    'fast-totes': 'totes reporting once a second',
    hours: 'hours of event time, starting at a UTC midnight',
    keep: 'keep the file (its path is in the output)',
    'compact-as-it-goes': 'compact each day once event time passes its end, as the service does (the file then reuses the freed pages)',
  },
)
const log = (line: string): void => void process.stderr.write(`bench:storage ${line}\n`)

/** The file's size and layout; the WAL is gone once the sink has closed. */
function measure(path: string, readings: number) {
  const { pageSize, freePages } = sqlitePages(path)
  const bytes = statSync(path).size
  return {
    file_bytes: bytes,
    free_pages: freePages,
    bytes_per_reading: round(bytes / readings),
    /** Without the free pages a later write reuses. */
    used_bytes_per_reading: round((bytes - freePages * pageSize) / readings),
    page_size: pageSize,
  }
}

async function main(): Promise<void> {
  const load = {
    slowTotes: Number(opts['slow-totes']),
    fastTotes: Number(opts['fast-totes']),
    hours: Number(opts.hours),
    startMs: Date.UTC(2025, 0, 6),
  }
  const dir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-storage-'))
  const path = join(dir, 'readings.db')
  try {
    let sink = createSqliteSink({ path, compaction: false } as Parameters<typeof createSqliteSink>[0])
    const started = performance.now()
    let written = 0
    const compacting = sink as typeof sink & { compact?: (o: { nowMs: number }) => Promise<{ readings: number; more: boolean }> }
    let nextDayEnd = load.startMs + 86_400_000 + 3_600_000
    for (const batch of readingBatches(load)) {
      await sink.write(batch)
      const eventTime = batch.at(-1)!.ts
      if (opts['compact-as-it-goes'] && compacting.compact !== undefined && eventTime >= nextDayEnd) {
        while ((await compacting.compact({ nowMs: eventTime })).more);
        log(`compacted up to ${new Date(nextDayEnd - 3_600_000).toISOString()}`)
        nextDayEnd += 86_400_000
      }
      written += batch.length
      if (written % 200_000 < batch.length) log(`${written} readings written`)
    }
    const writeS = (performance.now() - started) / 1_000
    const readings = await sink.count()
    await sink.close()
    const stored = measure(path, readings)
    log(`${readings} readings: ${stored.bytes_per_reading} bytes each as written`)

    let compacted: (ReturnType<typeof measure> & { compact_s: number }) | null = null
    sink = createSqliteSink({ path, compaction: false } as Parameters<typeof createSqliteSink>[0])
    const compactable = sink as typeof sink & { compact?: (o: { nowMs: number }) => Promise<{ readings: number; more: boolean }> }
    if (compactable.compact !== undefined) {
      const t = performance.now()
      const nowMs = load.startMs + (Math.ceil(load.hours / 24) + 1) * 86_400_000
      while ((await compactable.compact({ nowMs })).more);
      const compactS = (performance.now() - t) / 1_000
      if ((await sink.count()) !== readings) throw new Error('compaction changed the number of readings')
      await sink.close()
      compacted = { ...measure(path, readings), compact_s: round(compactS) }
      log(`compacted: ${compacted.bytes_per_reading} bytes each`)
    } else await sink.close()

    process.stdout.write(
      `${JSON.stringify(
        {
          load: { slow_totes: load.slowTotes, fast_totes: load.fastTotes, hours: load.hours, readings },
          write_s: round(writeS),
          readings_per_s: Math.round(readings / writeS),
          as_written: stored,
          compacted,
          load_average_1m: round(loadavg()[0]!),
          path: opts.keep ? path : undefined,
        },
        null,
        2,
      )}\n`,
    )
  } finally {
    if (!opts.keep) rmSync(dir, { recursive: true, force: true })
  }
}

await main()
