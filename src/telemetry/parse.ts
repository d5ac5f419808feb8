import { z } from 'zod'
import { parseStrictJson } from '../strict-json.js'
import { checkReading, MAX_BATCH, prefixed, reject, type ParsedReading, type ParseResult } from './parse-limits.js'
import { parseSenmlPack, looksLikeSenml } from './parse-senml.js'
import { parseRfc3339 } from './parse-time.js'

export type { ParsedReading, ParseErrorCode, ParseRejection, ParseResult } from './parse-limits.js'

/** 500 readings of ~200 bytes each fit comfortably; a SenML pack of the same is ~4x larger. */
const MAX_PAYLOAD_BYTES = 512 * 1024

const optionalIn = (min: number, max: number) => z.number().min(min).max(max).nullish()

/** The reading object a tote publishes (broker/README.md, Topics). Unknown members are ignored so gateways can add their own. */
const readingShape = z.object({
  ts: z.union([z.number().int(), z.string()]),
  temp_c: z.number(),
  seq: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullish(),
  battery: optionalIn(0, 1),
  humidity: optionalIn(0, 100),
  lat: optionalIn(-90, 90),
  lng: optionalIn(-180, 180),
})

/**
 * Tote payload parsing (broker/README.md, Topics): one reading object, an array of up to 500 of them, or a
 * SenML pack (RFC 8428). Runs for every publish on the ingest hot path (~100k readings/s): one
 * pass, the first problem found is the answer, with a stable code and a reason a gateway
 * developer can act on.
 */
export function parseReadings(payload: Buffer, nowMs: number): ParseResult {
  if (payload.length > MAX_PAYLOAD_BYTES) {
    return reject('payload_too_large', `payload is ${payload.length} bytes; the limit is ${MAX_PAYLOAD_BYTES}`)
  }
  // Refused, not repaired: invalid UTF-8, nesting deeper than 32, a `__proto__`-like member.
  const parsed = parseStrictJson(payload)
  if (!parsed.ok) {
    const what = parsed.problem === 'reserved_member' ? `member ${parsed.pointer} has a reserved name` : parsed.message
    return reject('invalid_json', `payload ${what}`)
  }
  const json = parsed.value
  if (Array.isArray(json)) {
    if (json.length === 0) return reject('empty_batch', 'payload is an empty array; send at least one reading')
    if (looksLikeSenml(json[0])) return parseSenmlPack(json, nowMs)
    if (json.length > MAX_BATCH) {
      return reject('batch_too_large', `batch has ${json.length} readings; the limit is ${MAX_BATCH} per publish`)
    }
    return parseReadingObjects(json, nowMs)
  }
  if (json !== null && typeof json === 'object') return parseReadingObjects([json], nowMs)
  return reject('invalid_reading', 'payload must be a reading object, an array of readings, or a SenML pack')
}

function parseReadingObjects(items: unknown[], nowMs: number): ParseResult {
  const readings: ParsedReading[] = new Array(items.length)
  const single = items.length === 1
  for (let i = 0; i < items.length; i++) {
    const shaped = readingShape.safeParse(items[i])
    if (!shaped.success) {
      const issue = shaped.error.issues[0]!
      return reject('invalid_reading', `${where(single, i)}${issue.path.join('.') || '(reading)'}: ${issue.message}`)
    }
    const r = shaped.data
    const ts = typeof r.ts === 'number' ? r.ts : parseRfc3339(r.ts)
    if (ts === null) return reject('invalid_reading', `${where(single, i)}ts: "${r.ts}" is not an RFC 3339 date-time`)
    const bad = checkReading(ts, r.temp_c, nowMs)
    if (bad !== null) return prefixed(where(single, i), bad)
    readings[i] = {
      ts,
      temp_c: r.temp_c,
      seq: r.seq ?? null,
      battery: r.battery ?? null,
      humidity: r.humidity ?? null,
      lat: r.lat ?? null,
      lng: r.lng ?? null,
    }
  }
  return { ok: true, readings }
}

const where = (single: boolean, i: number) => (single ? '' : `readings[${i}].`)
