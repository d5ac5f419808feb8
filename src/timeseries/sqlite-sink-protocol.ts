import type { ReadingRow } from './sink.js'

/**
 * Messages between the main thread and the readings writer thread (sqlite-sink-thread.ts,
 * sqlite-sink-worker.ts). Rows cross as columns: their distinct ids in one array and everything else
 * in one Float64Array whose buffer is transferred, not copied (structured-cloning tens of thousands of
 * small objects a second would cost the event loop more than it saves).
 */

export type EncodedRows = {
  /** The distinct ids of the rows (tote, delivery and rx ids): a batch repeats one tote's ids a hundred times. */
  strings: string[]
  /** NUMBERS_PER_ROW per row, in `encodeRows` order; NaN stands for null, ids are indexes into `strings`. */
  numbers: Float64Array
}

export type Request =
  | { id: number; op: 'write'; rows: EncodedRows }
  | { id: number; op: 'readingsForDelivery'; args: [deliveryId: string, fromMs: number, toMs: number] }
  | { id: number; op: 'bucketed'; args: [deliveryId: string, fromMs: number, toMs: number, stepMs: number] }
  | { id: number; op: 'readingsForTote'; args: [toteId: string, fromMs: number, toMs: number] }
  | { id: number; op: 'count' }
  | { id: number; op: 'close' }

/** id 0 answers the start-up (the file opened, or why not). */
export type Reply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { name: string; message: string; code?: string } }

const NUMBERS_PER_ROW = 12
const num = (x: number | null | undefined): number => (x === null || x === undefined ? Number.NaN : x)
const orNull = (x: number): number | null => (Number.isNaN(x) ? null : x)

export function encodeRows(rows: readonly ReadingRow[]): EncodedRows {
  const strings: string[] = []
  const index = new Map<string, number>()
  const ref = (id: string | null): number => {
    if (id === null) return Number.NaN
    let i = index.get(id)
    if (i === undefined) {
      i = strings.push(id) - 1
      index.set(id, i)
    }
    return i
  }
  const numbers = new Float64Array(rows.length * NUMBERS_PER_ROW)
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!
    const at = i * NUMBERS_PER_ROW
    numbers[at] = ref(r.tote_id)
    numbers[at + 1] = ref(r.delivery_id)
    numbers[at + 2] = ref(r.rx_id)
    numbers[at + 3] = num(r.ts)
    numbers[at + 4] = num(r.temp_c)
    numbers[at + 5] = num(r.battery)
    numbers[at + 6] = num(r.humidity)
    numbers[at + 7] = num(r.lat)
    numbers[at + 8] = num(r.lng)
    numbers[at + 9] = num(r.seq)
    numbers[at + 10] = num(r.received_at)
    numbers[at + 11] = r.late ? 1 : 0
  }
  return { strings, numbers }
}

export function decodeRows({ strings, numbers }: EncodedRows): ReadingRow[] {
  const n = numbers.length / NUMBERS_PER_ROW
  const str = (x: number): string | null => (Number.isNaN(x) ? null : strings[x]!)
  const rows: ReadingRow[] = new Array(n)
  for (let i = 0; i < n; i++) {
    const at = i * NUMBERS_PER_ROW
    rows[i] = {
      tote_id: str(numbers[at]!) as string, delivery_id: str(numbers[at + 1]!), rx_id: str(numbers[at + 2]!),
      ts: orNull(numbers[at + 3]!) as number, temp_c: orNull(numbers[at + 4]!) as number,
      battery: orNull(numbers[at + 5]!), humidity: orNull(numbers[at + 6]!), lat: orNull(numbers[at + 7]!), lng: orNull(numbers[at + 8]!),
      seq: orNull(numbers[at + 9]!), received_at: orNull(numbers[at + 10]!) as number, late: numbers[at + 11] === 1,
    }
  }
  return rows
}
