import type { CustodyEvent, FailureReason } from './custody-event.js'

/**
 * A delivery's attempts (docs/api.md, Attempts), read from its custody chain, the one record of
 * them: a `dispatched` event starts the first, each `reattempted` event the next, and a `failed`
 * event ends the one under way with its reason. No column repeats them, so they cannot disagree.
 */
export type Attempt = {
  number: number
  /** When it set out: the dispatch, or the reattempt. */
  started_at: string
  failed_at: string | null
  /** Null while it has not failed, and on failures recorded before reasons were coded. */
  reason: FailureReason | null
  note: string | null
}

/** The attempt under way or last made: 1, plus one for each reattempt. */
export function attemptNumber(chain: readonly CustodyEvent[]): number {
  return 1 + chain.filter((e) => e.type === 'reattempted').length
}

export function attemptsOf(chain: readonly CustodyEvent[]): Attempt[] {
  const attempts: Attempt[] = []
  for (const e of chain) {
    if (e.type === 'dispatched' || e.type === 'reattempted') {
      attempts.push({ number: attempts.length + 1, started_at: e.occurred_at, failed_at: null, reason: null, note: null })
    } else if (e.type === 'failed' && attempts.length > 0) {
      Object.assign(attempts.at(-1)!, { failed_at: e.occurred_at, reason: e.attempt?.reason ?? null, note: e.attempt?.note ?? null })
    }
  }
  return attempts
}
