/**
 * What a parsed reading looks like and the physical limits it must respect before it is stored
 * (broker/README.md, Acknowledgements: a refused payload). Each bound says why.
 */

export type ParsedReading = {
  /** Event time, epoch ms. */
  ts: number
  temp_c: number
  seq: number | null
  /** State of charge, 0..1. */
  battery: number | null
  /** Relative humidity, %. */
  humidity: number | null
  lat: number | null
  lng: number | null
}

/** Stable codes for the `error` member of the JSON published on a tote's errors topic. */
export type ParseErrorCode =
  | 'payload_too_large'
  | 'invalid_json'
  | 'invalid_reading'
  | 'invalid_senml'
  | 'unsupported_unit'
  | 'empty_batch'
  | 'batch_too_large'
  | 'temp_out_of_range'
  | 'ts_in_future'
  | 'ts_too_old'

export type ParseRejection = { ok: false; reason: string; code: ParseErrorCode }
export type ParseResult = { ok: true; readings: ParsedReading[] } | ParseRejection

export const reject = (code: ParseErrorCode, reason: string): ParseRejection => ({ ok: false, reason, code })

export const prefixed = (where: string, r: ParseRejection): ParseRejection => reject(r.code, where + r.reason)

/**
 * Lowest plausible tote temperature, °C. Ultra-cold shipments (mRNA vaccines are stored at
 * −90 to −60 °C) are the coldest a pharmacy's cold chain goes; anything colder is a sensor
 * fault, e.g. the −127 °C a DS18B20 probe reports when disconnected.
 */
const MIN_TEMP_C = -90

/**
 * Highest plausible tote temperature, °C. A closed vehicle in the sun reaches about 70 °C; the
 * bound stays below +85 °C, the DS18B20 power-on reset value that a faulty probe keeps sending.
 */
const MAX_TEMP_C = 80

/** Readings more than this far ahead of the broker's clock are refused. */
const MAX_FUTURE_MS = 5 * 60_000

/** 2000-01-01T00:00:00Z. Earlier times come from a sensor whose clock was never set. */
const MIN_TS_MS = Date.UTC(2000, 0, 1)

/** Gateways batch at most this many readings in one publish (broker/README.md, Topics). */
export const MAX_BATCH = 500

/** A SenML pack carries one record per measurement; 10 measurements per reading is generous. */
export const MAX_SENML_RECORDS = MAX_BATCH * 10

/** Range checks shared by both formats. The caller puts where the reading is in front of the reason. */
export function checkReading(ts: number, tempC: number, nowMs: number): ParseRejection | null {
  if (tempC < MIN_TEMP_C || tempC > MAX_TEMP_C) {
    return reject('temp_out_of_range', `temp_c: ${tempC} °C is outside the physical range ${MIN_TEMP_C}..${MAX_TEMP_C} °C (sensor fault?)`)
  }
  if (ts > nowMs + MAX_FUTURE_MS) {
    return reject('ts_in_future', `ts: ${new Date(ts).toISOString()} is more than 5 minutes ahead of the server clock`)
  }
  if (ts < MIN_TS_MS) {
    // A 10-digit number is almost always epoch seconds sent where milliseconds were expected.
    const hint = ts > 946_684_800 && ts < 1e10 ? '; it looks like epoch seconds, send epoch milliseconds' : ''
    return reject('ts_too_old', `ts: ${ts} is before 2000-01-01${hint}`)
  }
  return null
}
