/**
 * `npm run bench:ingest -- --sink questdb-standin` (or `--sink questdb`, a real one): the QuestDB stand-in (questdb-standin.ts, its
 * own process) and the QuestDB targets, judged from the run's single-reading and batch
 * phases.
 */
import { fork } from 'node:child_process'
import { join } from 'node:path'
import { repoRoot } from './ingest-service.js'
import { round } from './ingest-stats.js'

/** The targets for QuestDB (the stand-in answers each write after 20 ms) (the issue's, on a 2-core machine). */
export const QUESTDB_TARGET = { singlePerS: 10_000, singleP99Ms: 100, batchPerS: 50_000 }

export type StandIn = {
  pid: number
  config: string
  /** Rows the stand-in's table holds: one per (tote_id, ts), as QuestDB's DEDUP keeps them. */
  stored(): Promise<number>
  close(): Promise<void>
}

/** Starts the stand-in answering writes 204 after `delayMs`. */
export async function startQuestdbStandin(delayMs: number): Promise<StandIn> {
  const child = fork(join(repoRoot, 'test/bench/lib/questdb-standin.ts'), [String(delayMs)], {
    cwd: repoRoot,
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())))
    child.once('exit', (code) => reject(new Error(`the QuestDB stand-in exited with code ${code}`)))
  })
  return {
    pid: child.pid!,
    config: `http::addr=127.0.0.1:${port};`,
    stored: () =>
      new Promise<number>((resolve) => {
        child.once('message', (m: { rows: number }) => resolve(m.rows))
        child.send({ type: 'count' })
      }),
    close: async () => {
      child.send({ type: 'stop' })
      await new Promise((resolve) => child.once('exit', resolve))
    },
  }
}

/** What test/bench/ingest.ts measured of a phase, as far as the QuestDB verdicts need it. */
export type PhaseFigures = {
  readingsPerS: number
  p50Ms: number
  p99Ms: number
  errors: number
  /** Publishes the pacer could not send because every tote's window was full: the service fell behind. */
  behind: number
  seconds: number
  /** CPU per acknowledged reading, µs: the service's and the QuestDB process's (null when not measured). */
  cpu: { us_per_reading: number | null; questdb_us_per_reading: number | null }
}

/**
 * Both QuestDB figures and whether each target was met. A paced phase sustains its rate when
 * (nearly) every paced reading was acknowledged, the pacer never found the windows full, and no
 * publish failed; single readings must also keep PUBACK p99 under 100 ms.
 */
export function questdbReport(delayMs: number | null, single: PhaseFigures, batch: PhaseFigures, paced: { single: number; batch: number }) {
  const sustained = (m: PhaseFigures, perS: number) => m.readingsPerS >= perS * 0.99 && m.behind === 0 && m.errors === 0
  const figures = (m: PhaseFigures, pacedPerS: number) => ({
    paced_readings_per_s: pacedPerS,
    readings_per_s: round(m.readingsPerS, 0),
    puback_p50_ms: round(m.p50Ms, 2),
    puback_p99_ms: round(m.p99Ms, 2),
    errors: m.errors,
    behind: m.behind,
    seconds: m.seconds,
    service_cpu_us_per_reading: m.cpu.us_per_reading,
    questdb_cpu_us_per_reading: m.cpu.questdb_us_per_reading,
    // The QuestDB figure: service + QuestDB, to hold against SQLite's service-only figure.
    total_cpu_us_per_reading:
      m.cpu.us_per_reading === null || m.cpu.questdb_us_per_reading === null
        ? null
        : round(m.cpu.us_per_reading + m.cpu.questdb_us_per_reading, 2),
  })
  return {
    // The stand-in's fixed answer delay; null against a real QuestDB.
    answer_delay_ms: delayMs,
    batches: {
      ...figures(batch, paced.batch),
      target: `>= ${QUESTDB_TARGET.batchPerS} readings/s`,
      met: paced.batch >= QUESTDB_TARGET.batchPerS && sustained(batch, QUESTDB_TARGET.batchPerS),
    },
    single: {
      ...figures(single, paced.single),
      target: `>= ${QUESTDB_TARGET.singlePerS} readings/s, PUBACK p99 < ${QUESTDB_TARGET.singleP99Ms} ms`,
      met:
        paced.single >= QUESTDB_TARGET.singlePerS &&
        sustained(single, QUESTDB_TARGET.singlePerS) &&
        single.p99Ms < QUESTDB_TARGET.singleP99Ms,
    },
  }
}
