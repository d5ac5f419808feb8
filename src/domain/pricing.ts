/**
 * What a fleet is paid for one ended delivery, from the rate card version in force at its
 * dispatch (docs/fleet.md, Pricing). Pure: every input is a value, every amount an integer
 * number of minor units (cents), and the one rounding rule is applied here only.
 *
 * Rounding rule: each amount of a line that is not already whole (the distance fee, the
 * after-hours supplement, the commission) is rounded to the minor unit, half to even, on its
 * own line; totals are sums of the lines' rounded amounts, so they equal the sum of the lines
 * to the cent however a period is split.
 */

export type RateCardTerms = {
  base_fee_cents: number
  per_km_cents: number
  cold_chain_surcharge_cents: number
  failed_attempt_fee_cents: number
  /** ×1.5 is 15000: ten-thousandths keep the multiplier exact. */
  after_hours_multiplier_e4: number
  /** 1 bps = 0.01 % of the gross. */
  commission_bps: number
}

/** How the delivery ended: `delivered` earns the delivery fees, `failed` (FAILED or RETURNED) the failed-attempt fee. */
export type Outcome = 'delivered' | 'failed'

export type PricingInputs = {
  outcome: Outcome
  cold_chain: boolean
  /** Great-circle metres from pickup to the end, null when either place is unknown (charged as 0 km). */
  distance_m: number | null
  after_hours: boolean
}

export type PriceLine = {
  base_cents: number
  distance_cents: number
  cold_chain_cents: number
  failed_attempt_cents: number
  after_hours_cents: number
  gross_cents: number
  commission_cents: number
  payout_cents: number
}

export const ZERO_LINE: PriceLine = {
  base_cents: 0,
  distance_cents: 0,
  cold_chain_cents: 0,
  failed_attempt_cents: 0,
  after_hours_cents: 0,
  gross_cents: 0,
  commission_cents: 0,
  payout_cents: 0,
}

/** `numerator / denominator` rounded to an integer, half to even (banker's rounding); both ≥ 0 integers. */
export function divideHalfEven(numerator: number, denominator: number): number {
  const quotient = Math.floor(numerator / denominator)
  const twice = 2 * (numerator - quotient * denominator)
  if (twice > denominator) return quotient + 1
  if (twice < denominator) return quotient
  return quotient % 2 === 0 ? quotient : quotient + 1
}

export function priceLine(card: RateCardTerms, inputs: PricingInputs): PriceLine {
  const delivered = inputs.outcome === 'delivered'
  const base_cents = delivered ? card.base_fee_cents : 0
  // per_km_cents × metres / 1000: exact until rounded here.
  const distance_cents = delivered && inputs.distance_m ? divideHalfEven(card.per_km_cents * inputs.distance_m, 1000) : 0
  const cold_chain_cents = delivered && inputs.cold_chain ? card.cold_chain_surcharge_cents : 0
  const failed_attempt_cents = delivered ? 0 : card.failed_attempt_fee_cents
  const subtotal = base_cents + distance_cents + cold_chain_cents + failed_attempt_cents
  // The multiplier applies to the whole subtotal; the supplement is what it adds.
  const after_hours_cents = inputs.after_hours ? divideHalfEven(subtotal * Math.max(0, card.after_hours_multiplier_e4 - 10_000), 10_000) : 0
  const gross_cents = subtotal + after_hours_cents
  const commission_cents = divideHalfEven(gross_cents * card.commission_bps, 10_000)
  return {
    base_cents,
    distance_cents,
    cold_chain_cents,
    failed_attempt_cents,
    after_hours_cents,
    gross_cents,
    commission_cents,
    payout_cents: gross_cents - commission_cents,
  }
}

export type LatLng = { lat: number; lng: number }

// IUGG mean Earth radius; the haversine error (≤ 0.5 %) is far below what a route adds to it.
const EARTH_RADIUS_M = 6_371_008.8

/** Great-circle distance in whole metres (haversine). */
export function distanceMetres(a: LatLng, b: LatLng): number {
  const rad = Math.PI / 180
  const dLat = (b.lat - a.lat) * rad
  const dLng = (b.lng - a.lng) * rad
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(dLng / 2) ** 2
  return Math.round(2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(h))))
}

/** After hours: before 08:00 or from 20:00 on, in the pharmacy's time zone (docs/fleet.md). */
const BUSINESS_HOURS = { from: 8, until: 20 } as const

const hourFormats = new Map<string, Intl.DateTimeFormat>()

/** Whether `at` (RFC 3339) falls outside business hours in the IANA `timeZone`. */
export function isAfterHours(at: string, timeZone: string): boolean {
  let format = hourFormats.get(timeZone)
  if (!format) {
    format = new Intl.DateTimeFormat('en-GB', { timeZone, hour: 'numeric', hourCycle: 'h23' })
    hourFormats.set(timeZone, format)
  }
  const hour = Number(format.formatToParts(new Date(at)).find((p) => p.type === 'hour')!.value)
  return hour < BUSINESS_HOURS.from || hour >= BUSINESS_HOURS.until
}
