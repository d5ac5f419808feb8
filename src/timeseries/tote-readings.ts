import { decodeCursor, encodeCursor, type Page, type PageRequest } from '../store/pagination.js'
import type { ReadingRow, ReadingSink } from './sink.js'

/** One reading as `GET /v1/totes/{id}/readings` shows it: where it went (its delivery, if any). */
export type ToteReading = {
  ts: string
  temp_c: number
  battery: number | null
  humidity: number | null
  seq: number | null
  received_at: string
  late: boolean
  delivery_id: string | null
  rx_id: string | null
}

// The first window read back from the cursor; each next one is this many times longer, so a tote
// silent for years is reached in a dozen reads and a busy one is answered from the first.
const FIRST_WINDOW_MS = 3_600_000
const GROWTH = 8

/**
 * A tote's readings newest first, `limit` a page. The cursor is the `ts` of the page's oldest
 * reading (a tote has one reading per ts): the next page holds the readings before it.
 */
export async function recentReadings(
  sink: ReadingSink,
  toteId: string,
  { limit, cursor }: PageRequest,
  nowMs: number,
): Promise<Page<ToteReading>> {
  let before = cursor ? Number(decodeCursor(cursor)) : Number.POSITIVE_INFINITY
  if (Number.isNaN(before)) before = 0
  // Readings up to 5 minutes ahead of the broker's clock are accepted: read a day past now.
  let toMs = Math.min(before, nowMs + 86_400_000)
  const found: ReadingRow[] = []
  for (let window = FIRST_WINDOW_MS; toMs > 0 && found.length <= limit; window *= GROWTH) {
    const fromMs = Math.max(0, toMs - window)
    const rows = await sink.readingsForTote(toteId, fromMs, toMs)
    found.push(...rows.reverse())
    toMs = fromMs
  }
  const data = found.slice(0, limit)
  const last = data.at(-1)
  return { data: data.map(shown), next_cursor: found.length > limit && last ? encodeCursor(last.ts) : null }
}

const shown = (r: ReadingRow): ToteReading => ({
  ts: new Date(r.ts).toISOString(),
  temp_c: r.temp_c,
  battery: r.battery,
  humidity: r.humidity,
  seq: r.seq,
  received_at: new Date(r.received_at).toISOString(),
  late: r.late,
  delivery_id: r.delivery_id,
  rx_id: r.rx_id,
})
