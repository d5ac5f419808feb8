import { z } from 'zod'
import { parseStrictJson, refusalText } from '../strict-json.js'
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
  // Refused, not repaired: invalid UTF-8, nesting deeper than 32, a `__proto__`-like member, a lone surrogate or NUL.
  const parsed = parseStrictJson(payload)
  if (!parsed.ok) return reject('invalid_json', `payload ${refusalText(parsed)}`)
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
    let r = wellShaped(items[i])
    if (r === null) {
      // zod says what is wrong (or accepts what the quick check is too strict for).
      const shaped = readingShape.safeParse(items[i])
      if (!shaped.success) {
        const issue = shaped.error.issues[0]!
        return reject('invalid_reading', `${where(single, i)}${issue.path.join('.') || '(reading)'}: ${issue.message}`)
      }
      r = shaped.data
    }
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

type Shaped = z.infer<typeof readingShape>

const isNullish = (x: unknown): x is null | undefined => x === null || x === undefined
const nullishIn = (x: unknown, min: number, max: number) => isNullish(x) || (typeof x === 'number' && x >= min && x <= max)

/**
 * The reading itself when it passes `readingShape` for certain, else null (then zod decides).
 * One publish in, one reading out at 10,000/s: zod's safeParse built ~500 B of garbage per
 * reading (its result, a copy of the object, the checks' contexts); this reads the members once.
 */
function wellShaped(item: unknown): Shaped | null {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return null
  const r = item as Record<keyof Shaped, unknown>
  const ts = r.ts
  if (typeof ts === 'number' ? !Number.isSafeInteger(ts) : typeof ts !== 'string') return null
  if (typeof r.temp_c !== 'number' || !Number.isFinite(r.temp_c)) return null
  if (!isNullish(r.seq) && !(Number.isSafeInteger(r.seq) && (r.seq as number) >= 0)) return null
  if (!nullishIn(r.battery, 0, 1) || !nullishIn(r.humidity, 0, 100) || !nullishIn(r.lat, -90, 90) || !nullishIn(r.lng, -180, 180))
    return null
  return r as Shaped
}

const where = (single: boolean, i: number) => (single ? '' : `readings[${i}].`)
