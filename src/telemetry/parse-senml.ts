import { z } from 'zod'
import { checkReading, MAX_BATCH, MAX_SENML_RECORDS, prefixed, reject, type ParsedReading, type ParseResult } from './parse-limits.js'

/**
 * SenML packs (RFC 8428, JSON representation). Records are resolved (§4.6: base name + name,
 * base time + time, base unit, base value + value) and the records that share a resolved time
 * become one reading. Recognised names, taken from the last `:`/`/` segment of the resolved
 * name so `bn: "urn:dev:mac:0024befffe804ff1:"` + `n: "temp"` works:
 *
 * | name | unit | field |
 * |---|---|---|
 * | `temp` | `Cel` (or `K`, converted) | `temp_c` (required in every reading) |
 * | `battery` | `/` (0..1, also when absent), `%EL` or `%` (0..100) | `battery` |
 * | `humidity` | `%RH` (or absent) | `humidity` |
 * | `lat`, `lon` / `lng` | `lat` / `lon` (or absent) | `lat`, `lng` |
 * | `seq` | absent | `seq` |
 *
 * Other names are ignored (a tote may report more than we store). String, boolean and data
 * values are ignored too.
 */

/** RFC 8428 §4.5.3: times below 2**28 s are relative to "now", larger ones are absolute. */
const RELATIVE_TIME_LIMIT_S = 2 ** 28

// RFC 8428 §4.1 labels. Unknown members stay on the object so the must-understand check can see them.
const recordShape = z.looseObject({
  bn: z.string().optional(),
  bt: z.number().optional(),
  bu: z.string().optional(),
  bv: z.number().optional(),
  bver: z.number().int().optional(),
  n: z.string().optional(),
  u: z.string().optional(),
  v: z.number().optional(),
  t: z.number().optional(),
})

/** A pack is an array of records; a record (rather than a reading) has one of these labels. */
export function looksLikeSenml(first: unknown): boolean {
  if (first === null || typeof first !== 'object') return false
  const o = first as Record<string, unknown>
  return o.bn !== undefined || o.bt !== undefined || o.n !== undefined || o.v !== undefined || o.bu !== undefined
}

type Field = 'temp_c' | 'battery' | 'humidity' | 'lat' | 'lng' | 'seq'

/** Local SenML name → reading field. */
const FIELDS: Partial<Record<string, Field>> = {
  temp: 'temp_c',
  temperature: 'temp_c',
  battery: 'battery',
  humidity: 'humidity',
  lat: 'lat',
  lon: 'lng',
  lng: 'lng',
  seq: 'seq',
}

export function parseSenmlPack(records: unknown[], nowMs: number): ParseResult {
  if (records.length > MAX_SENML_RECORDS) {
    return reject('batch_too_large', `SenML pack has ${records.length} records; the limit is ${MAX_SENML_RECORDS}`)
  }
  const byTime = new Map<number, ParsedReading>()
  // Base values carry over to every later record until replaced (RFC 8428 §4.1).
  let bn = '',
    bt = 0,
    bu: string | undefined,
    bv = 0
  for (let i = 0; i < records.length; i++) {
    const parsed = recordShape.safeParse(records[i])
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!
      return reject('invalid_senml', `records[${i}].${issue.path.join('.') || '(record)'}: ${issue.message}`)
    }
    const rec = parsed.data
    for (const label in rec) {
      // RFC 8428 §4.4: a label ending in "_" must be understood, or the pack refused.
      if (label.endsWith('_')) return reject('invalid_senml', `records[${i}]: must-understand label "${label}" is not supported`)
    }
    if (rec.bn !== undefined) bn = rec.bn
    if (rec.bt !== undefined) bt = rec.bt
    if (rec.bu !== undefined) bu = rec.bu
    if (rec.bv !== undefined) bv = rec.bv
    if (rec.v === undefined) continue // base-only record, or a string/boolean/data value

    const name = localName(bn + (rec.n ?? ''))
    const unit = rec.u ?? bu
    const value = bv + rec.v
    const timeS = bt + (rec.t ?? 0)
    const ts = Math.round((timeS < RELATIVE_TIME_LIMIT_S ? nowMs / 1000 + timeS : timeS) * 1000)

    const field = FIELDS[name]
    if (field === undefined) continue // a measurement we do not store
    let draft = byTime.get(ts)
    if (draft === undefined) {
      draft = { ts, temp_c: NaN, seq: null, battery: null, humidity: null, lat: null, lng: null }
      byTime.set(ts, draft)
    }
    const problem = assign(field, unit, value, draft)
    if (problem !== null) return reject(problem.code, `records[${i}]: ${problem.reason}`)
  }

  if (byTime.size === 0) return reject('empty_batch', 'SenML pack has no temp records')
  if (byTime.size > MAX_BATCH) {
    return reject('batch_too_large', `SenML pack has ${byTime.size} readings; the limit is ${MAX_BATCH} per publish`)
  }
  const readings: ParsedReading[] = []
  for (const reading of byTime.values()) {
    if (Number.isNaN(reading.temp_c)) {
      return reject(
        'invalid_senml',
        `SenML pack has measurements at ${new Date(reading.ts).toISOString()} but no temp record for that time`,
      )
    }
    const bad = checkReading(reading.ts, reading.temp_c, nowMs)
    if (bad !== null) return prefixed(`reading at ${new Date(reading.ts).toISOString()}: `, bad)
    readings.push(reading)
  }
  return { ok: true, readings }
}

function localName(resolved: string): string {
  const cut = Math.max(resolved.lastIndexOf(':'), resolved.lastIndexOf('/'))
  return cut < 0 ? resolved : resolved.slice(cut + 1)
}

type Problem = { code: 'invalid_senml' | 'unsupported_unit'; reason: string }
const unitProblem = (reason: string): Problem => ({ code: 'unsupported_unit', reason })
const rangeProblem = (reason: string): Problem => ({ code: 'invalid_senml', reason })

/** Writes one resolved measurement into its reading, converting units. */
function assign(field: Field, unit: string | undefined, value: number, reading: ParsedReading): Problem | null {
  switch (field) {
    case 'temp_c':
      if (unit === 'Cel') reading.temp_c = value
      else if (unit === 'K') reading.temp_c = value - 273.15
      else return unitProblem(`temp must have u "Cel" or "K" (RFC 8428 §12.1), got ${unit === undefined ? 'no unit' : `"${unit}"`}`)
      return null
    case 'battery': {
      const ratio = unit === undefined || unit === '/' ? value : unit === '%EL' || unit === '%' ? value / 100 : NaN
      if (Number.isNaN(ratio)) return unitProblem(`battery must have u "/", "%EL" or "%", got "${unit}"`)
      if (ratio < 0 || ratio > 1) return rangeProblem(`battery ${value}${unit ?? ''} is outside 0..100 %`)
      reading.battery = ratio
      return null
    }
    case 'humidity':
      if (unit !== undefined && unit !== '%RH') return unitProblem(`humidity must have u "%RH", got "${unit}"`)
      if (value < 0 || value > 100) return rangeProblem(`humidity ${value} is outside 0..100 %RH`)
      reading.humidity = value
      return null
    case 'lat':
      if (unit !== undefined && unit !== 'lat') return unitProblem(`lat must have u "lat", got "${unit}"`)
      if (value < -90 || value > 90) return rangeProblem(`lat ${value} is outside -90..90`)
      reading.lat = value
      return null
    case 'lng':
      if (unit !== undefined && unit !== 'lon') return unitProblem(`lon must have u "lon", got "${unit}"`)
      if (value < -180 || value > 180) return rangeProblem(`lon ${value} is outside -180..180`)
      reading.lng = value
      return null
    case 'seq':
      if (!Number.isSafeInteger(value) || value < 0) return rangeProblem(`seq ${value} is not a non-negative integer`)
      reading.seq = value
      return null
  }
}
