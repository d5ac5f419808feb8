// Times in the pharmacy's own time zone (IANA), durations and temperatures as a pharmacist reads them.

export function dateTime(iso: string | null | undefined, timeZone: string): string {
  if (!iso) return '—'
  return new Intl.DateTimeFormat('en-US', {
    timeZone,
    year: 'numeric',
    month: 'short',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    timeZoneName: 'short',
  }).format(new Date(iso))
}

/** An ETA against now, as a person reads it: "in 12 min", "in 1 h 05 min", "25 min late". */
export function untilEta(iso: string, nowMs: number): string {
  const s = (Date.parse(iso) - nowMs) / 1000
  return s >= 0 ? `in ${duration(s)}` : `${duration(-s)} late`
}

export function duration(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)} s`
  const minutes = Math.round(seconds / 60)
  return minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`
}

/** Straight-line metres between two points (haversine on the sphere the service measures on, src/domain/eta.ts). */
export function distanceM(a: { lat: number; lng: number }, b: { lat: number; lng: number }): number {
  const rad = Math.PI / 180
  const dLat = (b.lat - a.lat) * rad
  const dLng = (b.lng - a.lng) * rad
  const x = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(dLng / 2) ** 2
  return 2 * 6_371_008.8 * Math.asin(Math.min(1, Math.sqrt(x)))
}

/** "850 m", "1.2 km". */
export const km = (m: number) => (m < 1000 ? `${Math.round(m / 10) * 10} m` : `${(m / 1000).toFixed(1)} km`)

export const celsius = (c: number | null | undefined) => (c === null || c === undefined ? '—' : `${c.toFixed(1)} °C`)

export const BREAK_REASONS: Record<string, string> = {
  hard_limit: 'crossed a hard limit',
  excursion_too_long: 'an excursion lasted too long',
  cumulative_budget: 'too much time out of range in total',
  mkt_exceeded: 'mean kinetic temperature over its limit',
  sensor_gap: 'the sensor was silent too long',
  stability_exhausted: 'an item exhausted its stability budget',
}

/** A tiny element builder: h('p', { class: 'x' }, 'text', child). Text is always set as text, never HTML. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | undefined> = {},
  ...children: (Node | string | null | undefined | false)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue
    el.setAttribute(k, v === true ? '' : v)
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c)
  return el
}
