import type { ReadingRow } from './sink.js'
/**
 * One tote's readings of one binding packed into a blob (a chunk, sqlite-compaction.ts): what
 * time-series engines do with old data. Per reading, in ts order:
 *
 * - two bytes of flags: per number column (temp_c, battery, humidity, lat, lng, seq) two bits
 *   saying how it is stored — absent (null), the same as the reading before, a whole number of
 *   its unit (hundredths of a degree, thousandths of charge, hundredths of a %, 1e-7 degree of
 *   latitude or longitude, 1 for seq) as a zigzag varint of the difference from the column's
 *   last such number, or the raw float64 when no unit holds it exactly — and one bit for `late`;
 * - `ts` as a zigzag varint of the change in the step between readings (delta of delta: 0, one
 *   byte, for a tote reporting on its own clock), starting from the chunk's first ts;
 * - `received_at - ts` as a zigzag varint (one or two bytes for a reading that came at once);
 * - the numbers whose flags say they are stored.
 *
 * A number is put in its unit only when dividing back gives the very same double
 * (`Object.is`), so every value reads back bit for bit, as the row tables give it.
 */

export type BoundChunkReading = ChunkReading & { binding_key: number | null }

/** A reading as a chunk holds it: the sink's row without whose (tote) and which binding it is. */
export type ChunkReading = Omit<ReadingRow, 'tote_id' | 'delivery_id' | 'rx_id'>

/** The reading's own fields of a stored row (a row table's `late` is 0 or 1), and nothing else. */
export const chunkReadingOf = (r: Omit<ChunkReading, 'late'> & { late: boolean | number }): ChunkReading => ({
  ts: r.ts,
  temp_c: r.temp_c,
  battery: r.battery,
  humidity: r.humidity,
  lat: r.lat,
  lng: r.lng,
  seq: r.seq,
  received_at: r.received_at,
  late: r.late === true || r.late === 1,
})

const NUMBERS = ['temp_c', 'battery', 'humidity', 'lat', 'lng', 'seq'] as const
/** Each column's unit, as a divisor; sensors report within these (simulators/scenarios.ts rounds the same way). */
const SCALES = [100, 1_000, 100, 1e7, 1e7, 1] as const
const ABSENT = 0
const SAME = 1
const SCALED = 2
const RAW = 3
const LATE_BIT = 1 << 12
/** Whole numbers of a unit are kept below this, so a difference of two stays a safe integer. */
const MAX_SCALED = 2 ** 50

export function encodeChunk(readings: readonly ChunkReading[]): Buffer {
  const out = new Writer(readings.length * 12)
  const last: (number | null)[] = NUMBERS.map(() => null)
  const lastScaled: number[] = NUMBERS.map(() => 0)
  let prevTs = readings[0]?.ts ?? 0
  let prevStep = 0
  for (const r of readings) {
    const at = out.reserve(2)
    let flags = r.late ? LATE_BIT : 0
    const step = r.ts - prevTs
    out.zigzag(step - prevStep)
    prevStep = step
    prevTs = r.ts
    out.zigzag(r.received_at - r.ts)
    for (let c = 0; c < NUMBERS.length; c++) {
      const v = r[NUMBERS[c]!]
      let kind: number
      if (v === null) kind = ABSENT
      else if (last[c] !== null && Object.is(v, last[c])) kind = SAME
      else {
        const scaled = Math.round(v * SCALES[c]!)
        if (Math.abs(scaled) < MAX_SCALED && Object.is((scaled + 0) / SCALES[c]!, v)) {
          kind = SCALED
          out.zigzag(scaled - lastScaled[c]!)
          lastScaled[c] = scaled
        } else {
          kind = RAW
          out.float(v)
        }
      }
      last[c] = v
      flags |= kind << (2 * c)
    }
    out.setUint16(at, flags)
  }
  return out.done()
}

/** The chunk's readings, in ts order; `firstTs` and `count` are stored beside the blob. */
export function decodeChunk(firstTs: number, count: number, data: Uint8Array): ChunkReading[]
/** The same, each reading carrying `binding_key`: made with it, not copied afterwards (a trace decodes thousands). */
export function decodeChunk(firstTs: number, count: number, data: Uint8Array, bindingKey: number | null): BoundChunkReading[]
export function decodeChunk(firstTs: number, count: number, data: Uint8Array, bindingKey?: number | null): ChunkReading[] {
  const cursor = new ChunkCursor(firstTs, count, data)
  const last = cursor.values
  const readings: ChunkReading[] = new Array(count)
  for (let i = 0; cursor.next(); i++) {
    const reading: ChunkReading & { binding_key?: number | null } = {
      ts: cursor.ts,
      temp_c: last[0]!,
      battery: last[1]!,
      humidity: last[2]!,
      lat: last[3]!,
      lng: last[4]!,
      seq: last[5]!,
      received_at: cursor.receivedAt,
      late: (cursor.flags & LATE_BIT) !== 0,
    }
    if (bindingKey !== undefined) reading.binding_key = bindingKey
    readings[i] = reading
  }
  return readings
}

/**
 * Only the times and temperatures of the chunk's readings, appended to `ts` and `temps`: what a
 * trace and a tote's reading times need, without an object per reading.
 */
export function decodeTimesAndTemperatures(firstTs: number, count: number, data: Uint8Array, ts: number[], temps: number[]): void {
  const cursor = new ChunkCursor(firstTs, count, data)
  while (cursor.next()) {
    ts.push(cursor.ts)
    temps.push(cursor.values[0]!)
  }
}

/** Steps through a chunk: each `next()` decodes the next reading into the cursor's fields. */
class ChunkCursor {
  ts: number
  receivedAt = 0
  flags = 0
  /** The number columns' values (NUMBERS order) of the reading decoded last. */
  readonly values: (number | null)[] = NUMBERS.map(() => null)
  private readonly scaled: number[] = NUMBERS.map(() => 0)
  private readonly input: Reader
  private step = 0
  private left: number

  constructor(firstTs: number, count: number, data: Uint8Array) {
    this.ts = firstTs
    this.left = count
    this.input = new Reader(data)
  }

  next(): boolean {
    if (this.left === 0) return false
    this.left--
    const { input, values, scaled } = this
    this.flags = input.uint16()
    this.step += input.zigzag()
    this.ts += this.step
    this.receivedAt = this.ts + input.zigzag()
    for (let c = 0; c < NUMBERS.length; c++) {
      const kind = (this.flags >> (2 * c)) & 3
      if (kind === ABSENT) values[c] = null
      else if (kind === SCALED) {
        scaled[c] = scaled[c]! + input.zigzag()
        values[c] = (scaled[c]! + 0) / SCALES[c]!
      } else if (kind === RAW) values[c] = input.float()
      // SAME: values[c] stays
    }
    return true
  }
}

class Writer {
  private buf: Buffer
  private at = 0
  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(Math.max(size, 16))
  }
  private room(n: number): void {
    if (this.at + n <= this.buf.length) return
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n))
    this.buf.copy(bigger, 0, 0, this.at)
    this.buf = bigger
  }
  reserve(n: number): number {
    this.room(n)
    const at = this.at
    this.at += n
    return at
  }
  setUint16(at: number, v: number): void {
    this.buf.writeUInt16LE(v, at)
  }
  /** Zigzag (small magnitudes of either sign in few bytes), then LEB128; arithmetic, not bit operators, so all safe integers fit. */
  zigzag(v: number): void {
    let z = v >= 0 ? v * 2 : -v * 2 - 1
    this.room(8)
    while (z >= 128) {
      this.buf[this.at++] = (z % 128) | 128
      z = Math.floor(z / 128)
    }
    this.buf[this.at++] = z
  }
  float(v: number): void {
    this.room(8)
    this.buf.writeDoubleLE(v, this.at)
    this.at += 8
  }
  done(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.at))
  }
}

class Reader {
  private at = 0
  private readonly view: DataView
  constructor(private readonly data: Uint8Array) {
    this.view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  }
  uint16(): number {
    const v = this.view.getUint16(this.at, true)
    this.at += 2
    return v
  }
  zigzag(): number {
    let z = 0
    let scale = 1
    for (;;) {
      const b = this.data[this.at++]
      if (b === undefined) throw new RangeError('chunk ends inside a number')
      z += (b & 127) * scale
      if (b < 128) break
      scale *= 128
    }
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2
  }
  float(): number {
    const v = this.view.getFloat64(this.at, true)
    this.at += 8
    return v
  }
}
