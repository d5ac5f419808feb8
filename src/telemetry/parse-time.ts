/**
 * Timestamps in tote payloads: RFC 3339 strings or epoch milliseconds (README, Telemetry over MQTT).
 *
 * `Date.parse` is not used for strings: V8 accepts far more than RFC 3339 and silently rolls
 * invalid dates over (`2024-02-30` becomes 1 March).
 */

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

function daysIn(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0
  return month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!
}

const ZERO = 48

/** The decimal number in `text[from, from + len)`, or -1 when a character is not a digit. */
function digits(text: string, from: number, len: number): number {
  let n = 0
  for (let i = from; i < from + len; i++) {
    const d = text.charCodeAt(i) - ZERO
    if (d < 0 || d > 9) return -1
    n = n * 10 + d
  }
  return n
}

/**
 * Epoch ms of an RFC 3339 §5.6 date-time (`2024-05-01T12:00:00.250+02:00`), or null when the
 * text is not one. `T`/`Z` may be lower case (§5.6 NOTE); fractions beyond ms are truncated;
 * leap seconds (`:60`) are refused. Reads character codes at fixed offsets: this runs once per
 * reading, and a capturing regex costs about a microsecond.
 */
export function parseRfc3339(text: string): number | null {
  if (text.length < 20) return null
  const year = digits(text, 0, 4),
    month = digits(text, 5, 2),
    day = digits(text, 8, 2)
  const hour = digits(text, 11, 2),
    minute = digits(text, 14, 2),
    second = digits(text, 17, 2)
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) return null
  if (text[4] !== '-' || text[7] !== '-' || text[13] !== ':' || text[16] !== ':') return null
  if (text[10] !== 'T' && text[10] !== 't') return null

  let i = 19
  let ms = 0
  if (text[i] === '.') {
    const start = ++i
    while (i < text.length && text.charCodeAt(i) >= ZERO && text.charCodeAt(i) <= ZERO + 9) i++
    if (i === start) return null
    const kept = Math.min(i - start, 3)
    ms = digits(text, start, kept) * 10 ** (3 - kept)
  }

  let offsetMin = 0
  const sign = text[i]
  if (sign === 'Z' || sign === 'z') {
    if (i + 1 !== text.length) return null
  } else if (sign === '+' || sign === '-') {
    if (i + 6 !== text.length || text[i + 3] !== ':') return null
    const offH = digits(text, i + 1, 2),
      offM = digits(text, i + 4, 2)
    if (offH < 0 || offH > 23 || offM < 0 || offM > 59) return null
    offsetMin = (sign === '-' ? -1 : 1) * (offH * 60 + offM)
  } else {
    return null
  }
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMin * 60_000
}
