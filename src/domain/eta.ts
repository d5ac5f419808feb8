/**
 * Where a driver is and when the goods arrive (docs/fleet.md, Live location and ETA): pure
 * functions of positions, an address and a clock reading, no I/O, so the property tests in
 * test/domain/eta.property.test.ts can hold them to their promises.
 */

/** A position as a driver's app reports it. */
export type Position = { lat: number; lng: number; accuracy_m: number; at: string }

/** Mean Earth radius (IUGG), metres: the sphere the haversine formula measures on. */
const EARTH_RADIUS_M = 6_371_008.8

/** A position may be this far ahead of the service's clock (phones' clocks drift); further is refused. */
export const MAX_CLOCK_SKEW_MS = 60_000
/** A driver's app reports no worse accuracy than this (a coarse cell-tower fix is a few km): beyond it a position says nothing. */
export const MAX_ACCURACY_M = 10_000
/** Positions in one batch (a REST request or an MQTT message). */
export const MAX_POSITIONS_PER_BATCH = 100

/** An ETA announced moves again only by at least this much before `delivery.eta-changed` is sent. */
export const ETA_CHANGE_THRESHOLD_MS = 5 * 60_000
/** At most one `delivery.eta-changed` per delivery within this long. */
export const ETA_CHANGE_MIN_INTERVAL_MS = 60_000
/** `delivery.arriving` once the driver is this close to the delivery address (straight line). */
export const ARRIVING_WITHIN_M = 500
/** Fleets that have not set `average_speed_kmh`: an urban average with stops (docs/fleet.md). */
export const DEFAULT_AVERAGE_SPEED_KMH = 25

/** Great-circle distance in metres (haversine), exact enough at delivery scale (≤ 0.5 % off the ellipsoid). */
export function distanceM(a: { lat: number; lng: number }, b: { lat: number; lng: number }): number {
  const rad = Math.PI / 180
  const dLat = (b.lat - a.lat) * rad
  const dLng = (b.lng - a.lng) * rad
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(dLng / 2) ** 2
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(h)))
}

/**
 * Arrival time (epoch ms) from a position at `atMs`, `distance` metres away, at `speedKmh`; never
 * before `nowMs` (a late position of a driver already due says "now", not "an hour ago").
 */
export function computedEtaMs(atMs: number, distance: number, speedKmh: number, nowMs: number): number {
  return Math.max(nowMs, atMs + Math.round((distance / ((speedKmh * 1_000) / 3_600)) * 1_000))
}

/** What a position is wrong with, as `{pointer, message}` members of a 422 or an MQTT error; empty when it is good. */
export function positionProblems(value: unknown, nowMs: number, pointer = ''): { pointer: string; message: string }[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return [{ pointer, message: 'must be an object {lat, lng, accuracy_m, at}' }]
  const p = value as Record<string, unknown>
  const problems: { pointer: string; message: string }[] = []
  const number = (key: string, min: number, max: number, unit: string) => {
    const v = p[key]
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max)
      problems.push({ pointer: `${pointer}/${key}`, message: `must be a number from ${min} to ${max}${unit}` })
  }
  number('lat', -90, 90, ' (degrees)')
  number('lng', -180, 180, ' (degrees)')
  number('accuracy_m', 0, MAX_ACCURACY_M, ' (metres)')
  const at = p.at
  const atMs = typeof at === 'string' && RFC3339.test(at) ? Date.parse(at) : Number.NaN
  if (Number.isNaN(atMs)) problems.push({ pointer: `${pointer}/at`, message: 'must be an RFC 3339 time such as 2026-11-29T14:05:00Z' })
  else if (atMs > nowMs + MAX_CLOCK_SKEW_MS)
    problems.push({
      pointer: `${pointer}/at`,
      message: `is in the future (more than ${MAX_CLOCK_SKEW_MS / 1_000} s ahead of the service's clock)`,
    })
  const extra = Object.keys(p).filter((k) => !['lat', 'lng', 'accuracy_m', 'at'].includes(k))
  for (const key of extra) problems.push({ pointer: `${pointer}/${key}`, message: 'is not a member of a position' })
  return problems
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/

/** A delivery's ETA state between positions (one row of `delivery_etas`). */
export type EtaState = {
  /** The ETA last announced by `delivery.eta-changed`, or the promised one before any was (epoch ms). */
  announcedMs: number
  /** When the last `delivery.eta-changed` was sent (epoch ms); null before the first. */
  announcedAtMs: number | null
  /** `delivery.arriving` has been sent. */
  arriving: boolean
}

export type EtaDecision = {
  /** The delivery's ETA now (epoch ms). */
  etaMs: number
  /** Send `delivery.eta-changed` (from `announcedMs` to `etaMs`). */
  changed: boolean
  /** Send `delivery.arriving`. */
  arriving: boolean
  next: EtaState
}

/**
 * A new ETA (and distance, when the address has coordinates) against what was announced:
 * `delivery.eta-changed` when it moved by ≥ 5 min and the last one is ≥ 1 min old; a move
 * held back by the minute is not lost (the next position compares with the same announced ETA);
 * `delivery.arriving` once, within 500 m.
 */
export function decideEta(state: EtaState, etaMs: number, distance: number | null, nowMs: number): EtaDecision {
  const moved = Math.abs(etaMs - state.announcedMs) >= ETA_CHANGE_THRESHOLD_MS
  const quiet = state.announcedAtMs === null || nowMs - state.announcedAtMs >= ETA_CHANGE_MIN_INTERVAL_MS
  const changed = moved && quiet
  const arriving = !state.arriving && distance !== null && distance <= ARRIVING_WITHIN_M
  return {
    etaMs,
    changed,
    arriving,
    next: {
      announcedMs: changed ? etaMs : state.announcedMs,
      announcedAtMs: changed ? nowMs : state.announcedAtMs,
      arriving: state.arriving || arriving,
    },
  }
}

/** The ETA in force: the fleet's router's while it holds, else the computed one (null without address coordinates). */
export function etaInForce(router: { etaMs: number; untilMs: number } | null, computedMs: number | null, nowMs: number): number | null {
  if (router && nowMs < router.untilMs) return router.etaMs
  return computedMs
}

/** A posted router ETA wins over the computed one for this long after it was posted (docs/fleet.md): a router re-posts well within it. */
export const ROUTER_ETA_HOLD_MS = 15 * 60_000
