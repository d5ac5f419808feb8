import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { ConfigError, ingestGatherMs, loadConfig } from '../../src/config.js'
import { GroupCommitter } from '../../src/telemetry/group-commit.js'
import type { ReadingRow, ReadingSink } from '../../src/timeseries/sink.js'
import { readingRow } from '../helpers/reading-row.js'

/**
 * How long an ingest group gathers readings before its one write: short with the embedded broker
 * (the tote's PUBACK waits for the write), longer with an external one (the broker has answered
 * the tote already), and INGEST_GATHER_MS when set.
 */

const EXTERNAL = { MQTT_URL: 'mqtt://rxtrace:secret@broker.example:1883' }

/** The sink writes each of two readings 10 ms apart went into, with the config's gather time. */
async function writesFor(env: Record<string, string>): Promise<number[][]> {
  const writes: number[][] = []
  const sink = { write: async (rows: readonly ReadingRow[]) => void writes.push(rows.map((r) => r.ts)) } as unknown as ReadingSink
  const committer = new GroupCommitter(sink, ingestGatherMs(loadConfig(env)))
  const first = committer.write([readingRow({ tote_id: 'tt_gather', ts: 1 })])
  await vi.advanceTimersByTimeAsync(10)
  const second = committer.write([readingRow({ tote_id: 'tt_gather', ts: 2 })])
  await vi.advanceTimersByTimeAsync(100)
  await Promise.all([first, second])
  return writes
}

describe('INGEST_GATHER_MS', () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }))
  afterEach(() => void vi.useRealTimers())

  it('with the embedded broker, readings 10 ms apart are two writes (2 ms by default)', async () => {
    expect(await writesFor({})).toEqual([[1], [2]])
  })

  it('with MQTT_URL, readings 10 ms apart share one write (20 ms by default)', async () => {
    expect(await writesFor(EXTERNAL)).toEqual([[1, 2]])
  })

  it('overrides either default', async () => {
    expect(await writesFor({ ...EXTERNAL, INGEST_GATHER_MS: '5' })).toEqual([[1], [2]])
    expect(await writesFor({ INGEST_GATHER_MS: '50' })).toEqual([[1, 2]])
  })

  it('refuses a value out of range with one line naming it', () => {
    expect(() => loadConfig({ INGEST_GATHER_MS: '1000' })).toThrow(ConfigError)
    expect(() => loadConfig({ INGEST_GATHER_MS: '1000' })).toThrow(/^invalid configuration: INGEST_GATHER_MS="1000": /)
    expect(() => loadConfig({ INGEST_GATHER_MS: '-1' })).toThrow(/INGEST_GATHER_MS="-1"/)
  })
})
