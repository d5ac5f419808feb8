import type Database from 'better-sqlite3'

/**
 * How far a new or widened span reaches beyond the reading that widened it, ms: spans are
 * rewritten about once per hour of a delivery's readings, and a trace reads at most an hour of
 * the tote's readings from a neighbouring delivery (filtered out by binding_key).
 */
const SPAN_PADDING_MS = 3_600_000

/** A binding's ts range on one tote: covers every reading of the binding from that tote. */
export type Span = { binding_key: number; tote_key: number; from_ts: number; to_ts: number }

/** Keeps binding_spans covering every written reading; runs inside the write transaction. */
export function createSpanWriter(db: Database.Database, maxCached: number) {
  const find = db.prepare<[number, number], Span>('SELECT * FROM binding_spans WHERE binding_key = ? AND tote_key = ?')
  const save = db.prepare<
    [number, number, number, number]
  >(`INSERT INTO binding_spans (binding_key, tote_key, from_ts, to_ts) VALUES (?, ?, ?, ?)
    ON CONFLICT (binding_key, tote_key) DO UPDATE SET from_ts = min(from_ts, excluded.from_ts), to_ts = max(to_ts, excluded.to_ts)`)
  // binding_key → its spans (one per tote that reported for it: one in practice). Bounded crudely, as the key dictionary.
  const cache = new Map<number, Span[]>()
  return {
    cover(bindingKey: number, toteKey: number, ts: number): void {
      let ofBinding = cache.get(bindingKey)
      let span: Span | undefined
      if (ofBinding !== undefined) for (const s of ofBinding) if (s.tote_key === toteKey) span = s // no closure per row
      if (span === undefined) {
        span = find.get(bindingKey, toteKey) ?? { binding_key: bindingKey, tote_key: toteKey, from_ts: ts, to_ts: ts - 1 }
        if (ofBinding === undefined) {
          if (cache.size >= maxCached) cache.clear()
          cache.set(bindingKey, (ofBinding = []))
        }
        ofBinding.push(span)
      }
      if (ts >= span.from_ts && ts <= span.to_ts) return
      if (ts < span.from_ts || span.to_ts < span.from_ts) span.from_ts = Math.min(span.from_ts, ts - SPAN_PADDING_MS)
      if (ts > span.to_ts) span.to_ts = ts + SPAN_PADDING_MS
      save.run(bindingKey, toteKey, span.from_ts, span.to_ts)
    },
    /** The binding's span on this tote, if it has readings. */
    of(bindingKey: number, toteKey: number): Span | null {
      return cache.get(bindingKey)?.find((s) => s.tote_key === toteKey) ?? find.get(bindingKey, toteKey) ?? null
    },
    /** The write rolled back: what it saved is gone, so re-read spans from the file. */
    forget(): void {
      cache.clear()
    },
  }
}
