import type { ReadingRow } from './sink.js'

/**
 * Readings as InfluxDB line protocol text (QuestDB ILP, protocol version 1), written straight
 * into the bytes of one request body (posted by questdb-ilp-post.ts).
 *
 * Why not the official client's Sender: it encodes row by row through a dozen calls, each
 * validating names and writing to its buffer, an `await` per row (~40 µs of CPU per reading).
 * Why bytes and not a string: a group's text built with `+=` is a rope of ~15 pieces a reading,
 * and turning it into the request's bytes flattened it again — with the building, ~5 µs of CPU
 * a reading and most of the sink's garbage in batch ingest (bench:ingest --sink
 * questdb-standin, profiled). Here a reading costs ~1 µs: each tote's symbols are encoded once
 * and copied, numbers are written as ASCII digits in place.
 *
 * Line: `table,tote_id=…[,delivery_id=…,rx_id=…] temp_c=…,[battery=…,…,seq=…i,]received_at=…t,late=t|f <ts ns>`
 * (symbols first, then columns; a null is an absent column).
 */

/** ILP escaping of a symbol value, as the official client does it: a backslash before a comma, equals sign, space, line break or backslash. */
const escapeSymbol = (value: string) => (/[,= \n\r\\]/.test(value) ? value.replace(/[,= \n\r\\]/g, '\\$&') : value)

/**
 * Upper bound of a line's bytes after its prefix: five doubles (at most 24 characters each in
 * JavaScript's shortest form, e.g. `-2.2250738585072014e-308`), three safe integers (≤ 17
 * characters) with their zeros, and the names and separators (~80 bytes).
 */
const MAX_LINE_TAIL_BYTES = 320
/** A reading's line with the symbols of a bound tote (ids of 29 characters) is ~210 bytes: one allocation usually holds the group. */
const TYPICAL_LINE_BYTES = 256
/**
 * Prefixes kept, one per tote: far more totes than a fleet connects to one copy; past it the
 * cache starts again rather than grow without bound.
 */
const MAX_CACHED_PREFIXES = 100_000

const ascii = (text: string) => Buffer.from(text, 'latin1')
const BATTERY = ascii(',battery=')
const HUMIDITY = ascii(',humidity=')
const LAT = ascii(',lat=')
const LNG = ascii(',lng=')
const SEQ = ascii(',seq=')
const RECEIVED_AT = ascii(',received_at=')
// received_at is a timestamp column in µs (`t`); the designated timestamp at the end is in ns.
const MS_TO_US_LATE = ascii('000t,late=t ')
const MS_TO_US_NOT_LATE = ascii('000t,late=f ')
const MS_TO_NS_END = ascii('000000\n')

type Prefix = { deliveryId: string | null; rxId: string | null; bytes: Buffer }

export type IlpEncoder = (rows: readonly ReadingRow[]) => Buffer

/** An encoder for `table`: each call returns one request body holding every row, in order. */
export function createIlpEncoder(table: string): IlpEncoder {
  const prefixes = new Map<string, Prefix>()
  // `table,tote_id=…,delivery_id=…,rx_id=… temp_c=`: the same for every reading of a tote while its binding lasts.
  const prefixOf = (r: ReadingRow): Buffer => {
    const cached = prefixes.get(r.tote_id)
    if (cached !== undefined && cached.deliveryId === r.delivery_id && cached.rxId === r.rx_id) return cached.bytes
    let text = `${table},tote_id=${escapeSymbol(r.tote_id)}`
    if (r.delivery_id !== null) text += `,delivery_id=${escapeSymbol(r.delivery_id)}`
    if (r.rx_id !== null) text += `,rx_id=${escapeSymbol(r.rx_id)}`
    const bytes = Buffer.from(`${text} temp_c=`, 'utf8')
    if (prefixes.size >= MAX_CACHED_PREFIXES) prefixes.clear()
    prefixes.set(r.tote_id, { deliveryId: r.delivery_id, rxId: r.rx_id, bytes })
    return bytes
  }

  return function encode(rows) {
    let out = Buffer.allocUnsafe(rows.length * TYPICAL_LINE_BYTES + MAX_LINE_TAIL_BYTES)
    let at = 0
    for (const r of rows) {
      const prefix = prefixOf(r)
      if (at + prefix.length + MAX_LINE_TAIL_BYTES > out.length) {
        const bigger = Buffer.allocUnsafe(Math.max(out.length * 2, at + prefix.length + MAX_LINE_TAIL_BYTES))
        out.copy(bigger, 0, 0, at)
        out = bigger
      }
      at += prefix.copy(out, at) // ~100 bytes: a native copy beats a loop
      at = putDouble(out, at, r.temp_c)
      if (r.battery !== null) at = putDouble(out, putBytes(out, at, BATTERY), r.battery)
      if (r.humidity !== null) at = putDouble(out, putBytes(out, at, HUMIDITY), r.humidity)
      if (r.lat !== null) at = putDouble(out, putBytes(out, at, LAT), r.lat)
      if (r.lng !== null) at = putDouble(out, putBytes(out, at, LNG), r.lng)
      if (r.seq !== null) {
        at = putInteger(out, putBytes(out, at, SEQ), r.seq)
        out[at++] = 0x69 // i: a long column
      }
      at = putInteger(out, putBytes(out, at, RECEIVED_AT), r.received_at)
      at = putInteger(out, putBytes(out, at, r.late ? MS_TO_US_LATE : MS_TO_US_NOT_LATE), r.ts)
      at = putBytes(out, at, MS_TO_NS_END)
    }
    return out.subarray(0, at)
  }
}

// The writers below put bytes at `at` and return where the next go. Plain loops: these pieces are
// a few bytes long, and below ~20 bytes Buffer#copy or TypedArray#set cost more per call than a
// loop (measured).

function putBytes(out: Buffer, at: number, bytes: Buffer): number {
  for (let i = 0; i < bytes.length; i++) out[at + i] = bytes[i]!
  return at + bytes.length
}

/** A number's text is ASCII: one byte a character. */
function putAscii(out: Buffer, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) out[at + i] = text.charCodeAt(i)
  return at + text.length
}

/**
 * A whole number's digits (`Math.trunc` of it). Timestamps are new numbers every time, so
 * `String(x)` would miss V8's number-to-string cache and allocate for each: digits are written
 * in place instead, last first, seven at a time in 32-bit integer arithmetic (a double's `%`
 * is a call to fmod).
 */
function putInteger(out: Buffer, at: number, x: number): number {
  const n = Math.trunc(x)
  if (n < 0 || !Number.isSafeInteger(n)) return putAscii(out, at, String(n))
  if (n < 1e7) return putSmall(out, at, n, 0)
  const high = Math.floor(n / 1e7)
  return putSmall(out, putInteger(out, at, high), n - high * 1e7, 7)
}

/** `n` (0 <= n < 1e7) in at least `width` digits, zero-padded. */
function putSmall(out: Buffer, at: number, n: number, width: number): number {
  let digits = 1
  for (let rest = n | 0; rest >= 10; rest = (rest / 10) | 0) digits++
  if (digits < width) digits = width
  let rest = n | 0
  for (let i = at + digits - 1; i >= at; i--) {
    const next = (rest / 10) | 0
    out[i] = 0x30 + rest - next * 10
    rest = next
  }
  return at + digits
}

/** A double in ILP text: JavaScript's shortest round-trip form, `.0` after a whole number so QuestDB reads a double. */
function putDouble(out: Buffer, at: number, x: number): number {
  at = putAscii(out, at, String(x))
  if (Number.isInteger(x) && Math.abs(x) < 1e21) {
    out[at++] = 0x2e // .
    out[at++] = 0x30 // 0
  }
  return at
}
