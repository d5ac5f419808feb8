// The stability budget ledger (rules/README.md, Stability budgets): a fold over a delivery's readings in
// event-time order that charges each item's product bands. Pure: no clock, no I/O; the same readings and
// versions always give a byte-identical ledger, however they were batched.
//
// Charging. Each interval between consecutive readings is charged at the earlier reading's temperature
// for up to max_gap_s; the rest of it is unknown and charged to the band of whichever of the two readings
// lies further from storage (a tie: the earlier one). Time in storage costs nothing; time in no band and
// outside storage exhausts the item at once. Budget-low fires once per item and band when remaining
// falls below 20 %; a band is exhausted when its consumed time exceeds its allowance. Only whole
// milliseconds are added, so the sums are exact.
import { rfc3339, type BudgetLowEvent, type ExhaustedItem, type ExhaustedReason } from './events.js'
import {
  bandsNearestFirst,
  distanceFromStorage,
  IN_NO_BAND,
  IN_STORAGE,
  type AddBack,
  type AssessmentSigner,
  type ItemStability,
} from './stability.js'

export type BandLedger = {
  min_c: number
  max_c: number
  allowed_ms: number
  /** Given back by excursion assessments. */
  add_back_ms: number
  /** The assessments in force on this band, over every leg (present once one is). */
  assessments?: { id: string; add_back_s: number; justification: string; signed_by?: AssessmentSigner | null }[]
  consumed_ms: number
  /** stability.budget-low was emitted for this band. */
  low: boolean
}

export type ItemLedger = {
  ndc: string
  product_id: string
  version: number
  storage: { min_c: number; max_c: number }
  hard_min_c: number | null
  hard_max_c: number | null
  freeze_thaw_max: number | null
  bands: BandLedger[]
  /** Band indexes nearest storage first: the order a temperature is placed in. */
  order: number[]
  storage_ms: number
  /** Time in no band and outside storage (any of it exhausts the item). */
  unbanded_ms: number
  exhausted: { at: number; reason: ExhaustedReason; band: number | null } | null
}

/** Plain JSON: persist with JSON.stringify, restore with JSON.parse. chargeReadings mutates it. */
export type StabilityLedger = {
  version: 1
  /** The delivery profile's max_gap_s in ms; null: every interval is charged at its earlier reading. */
  max_gap_ms: number | null
  /** 1 for the first delivery of a prescription, n + 1 for each redelivery. */
  leg: number
  last_ts: number | null
  last_temp: number | null
  /** Time between the first and last reading of every leg so far. */
  observed_ms: number
  freeze_thaw: { count: number; below_zero: boolean }
  items: ItemLedger[]
  /** Delivery ids of every leg so far, first leg first (set by the service's plan; absent in bare ledgers). */
  legs?: string[]
}

/**
 * What a delivery is judged by besides its profile: its items' stability versions (recorded when the
 * prescription was created), for a redelivery the ledger the earlier legs left, and every leg's delivery id.
 */
export type StabilityPlan = {
  items: ItemStability[]
  carried: StabilityLedger | null
  legs: string[]
  /**
   * The pharmacy releases by budget (`auto_within_budget`) and every item of the prescription has a
   * product: the profile's time and MKT rules give way to the ledger; hard limits still break.
   */
  auto?: boolean
  /** Budget given back to this leg by excursion assessments in force (earlier legs' are in `carried`). */
  add_backs?: AddBack[]
}

/** The ledger a delivery starts from: the earlier legs' for a redelivery, else an empty one. */
export function startLedger(plan: StabilityPlan, maxGapS: number | null): StabilityLedger {
  const addBacks = plan.add_backs ?? []
  const ledger = plan.carried === null ? openLedger(plan.items, maxGapS, addBacks) : giveBack(nextLeg(plan.carried), addBacks)
  ledger.legs = [...plan.legs]
  return ledger
}

export type ItemExhaustedEvent = { type: 'stability.exhausted'; key: string; at: number; data: ExhaustedItem }

export type StabilityEvent = BudgetLowEvent | ItemExhaustedEvent

const stabilityEventKey = {
  budgetLow: (item: number, band: number) => `budget-low:${item}:${band}`,
  exhausted: (item: number) => `exhausted:${item}`,
} as const

/** Remaining below this share of a band's budget is low (Controlant and ELPRO warn at a fifth). */
const LOW_SHARE_NUM = 1
const LOW_SHARE_DEN = 5

/** A ledger with nothing charged, for the items (in the delivery's order) and the delivery profile's max_gap_s. */
export function openLedger(items: readonly ItemStability[], maxGapS: number | null, addBacks: readonly AddBack[] = []): StabilityLedger {
  const ledger: StabilityLedger = {
    version: 1,
    max_gap_ms: maxGapS === null ? null : maxGapS * 1000,
    leg: 1,
    last_ts: null,
    last_temp: null,
    observed_ms: 0,
    freeze_thaw: { count: 0, below_zero: false },
    items: items.map(({ ndc, product_id, version, stability: s }) => ({
      ndc,
      product_id,
      version,
      storage: { min_c: s.storage.min_c, max_c: s.storage.max_c },
      hard_min_c: s.hard_min_c ?? null,
      hard_max_c: s.hard_max_c ?? null,
      freeze_thaw_max: s.freeze_thaw_max,
      bands: s.budgets.map((b) => ({
        min_c: b.min_c,
        max_c: b.max_c,
        allowed_ms: b.allowed_s * 1000,
        add_back_ms: 0,
        consumed_ms: 0,
        low: false,
      })),
      order: bandsNearestFirst(s.storage, s.budgets),
      storage_ms: 0,
      unbanded_ms: 0,
      exhausted: null,
    })),
  }
  return giveBack(ledger, addBacks)
}

/**
 * The next leg of the same prescription (a redelivery): what earlier legs consumed carries over; the
 * time between legs (back at the pharmacy, released) is not charged. Returns a new ledger.
 */
export function nextLeg(ledger: StabilityLedger): StabilityLedger {
  const next = structuredClone(ledger)
  next.leg += 1
  next.last_ts = null
  next.last_temp = null
  return next
}

/** Adds assessments' budget to a ledger's bands (those naming no item or band of it are ignored). MUTATES `ledger`. */
function giveBack(ledger: StabilityLedger, addBacks: readonly AddBack[]): StabilityLedger {
  for (const a of addBacks) {
    const band = ledger.items.find((item) => item.ndc === a.ndc)?.bands[a.band]
    if (!band) continue
    band.add_back_ms += a.add_back_s * 1000
    if (a.id !== undefined)
      (band.assessments ??= []).push({
        id: a.id,
        add_back_s: a.add_back_s,
        justification: a.justification ?? '',
        signed_by: a.signed_by ?? null,
      })
  }
  return ledger
}

/**
 * Charges readings in ts order. MUTATES `ledger` (and returns it) and appends to `events`. Readings at
 * or before ledger.last_ts, or with a non-finite ts/temp_c, are skipped (late ones: replay from the
 * leg's start ledger).
 */
export function chargeReadings(
  ledger: StabilityLedger,
  readings: readonly { ts: number; temp_c: number }[],
  events: StabilityEvent[] = [],
): { ledger: StabilityLedger; events: StabilityEvent[] } {
  for (let r = 0; r < readings.length; r++) {
    const reading = readings[r]!
    chargeReading(ledger, reading.ts, reading.temp_c, events)
  }
  return { ledger, events }
}

/** One reading (the rule engine charges the ledger reading by reading, in its own fold). MUTATES `ledger`. */
export function chargeReading(ledger: StabilityLedger, ts: number, temp: number, events: StabilityEvent[]): void {
  if (!Number.isFinite(ts) || !Number.isFinite(temp)) return
  const last = ledger.last_ts
  if (last !== null && ts <= last) return
  if (last !== null) chargeInterval(ledger, last, ledger.last_temp!, ts, temp, events)
  takeReading(ledger, ts, temp, events)
  ledger.last_ts = ts
  ledger.last_temp = temp
}

function chargeInterval(
  ledger: StabilityLedger,
  from: number,
  fromTemp: number,
  to: number,
  toTemp: number,
  events: StabilityEvent[],
): void {
  const span = to - from
  const gap = ledger.max_gap_ms
  const known = gap === null || span <= gap ? span : gap
  ledger.observed_ms += span
  const items = ledger.items
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!
    charge(item, i, placeOf(item, fromTemp), from, known, fromTemp, events)
    if (known < span) {
      const furtherTemp = distanceFromStorage(item.storage, toTemp) > distanceFromStorage(item.storage, fromTemp) ? toTemp : fromTemp
      charge(item, i, placeOf(item, furtherTemp), from + known, span - known, null, events)
    }
  }
}

/** IN_STORAGE, IN_NO_BAND or the index of the band holding `temp` (shared endpoints: nearer storage). */
function placeOf(item: ItemLedger, temp: number): number {
  if (temp >= item.storage.min_c && temp <= item.storage.max_c) return IN_STORAGE
  const order = item.order
  for (let k = 0; k < order.length; k++) {
    const band = item.bands[order[k]!]!
    if (temp >= band.min_c && temp <= band.max_c) return order[k]!
  }
  return IN_NO_BAND
}

/** [from, from + ms) spent at `place`. */
function charge(
  item: ItemLedger,
  index: number,
  place: number,
  from: number,
  ms: number,
  temp: number | null,
  events: StabilityEvent[],
): void {
  if (!(ms > 0)) return
  if (place === IN_STORAGE) {
    item.storage_ms += ms
    return
  }
  if (place === IN_NO_BAND) {
    item.unbanded_ms += ms
    exhaust(item, index, 'outside_bands', null, from, temp, events)
    return
  }
  const band = item.bands[place]!
  const before = band.consumed_ms
  band.consumed_ms = before + ms
  const budget = band.allowed_ms + band.add_back_ms
  // remaining < budget / 5  ⇔  consumed > budget - budget / 5; budgets are whole seconds, so this is whole ms.
  const lowAfter = budget - (budget * LOW_SHARE_NUM) / LOW_SHARE_DEN
  if (!band.low && item.exhausted === null && budget > 0 && before + ms > lowAfter) {
    band.low = true
    const at = from + Math.max(0, lowAfter - before)
    events.push({
      type: 'stability.budget-low',
      key: stabilityEventKey.budgetLow(index, place),
      at,
      data: {
        item: index,
        ndc: item.ndc,
        product_id: item.product_id,
        version: item.version,
        band: bandOf(band),
        remaining_s: (budget - lowAfter) / 1000,
      },
    })
  }
  // "Exceeds" is strict: exactly the allowance is still within budget.
  if (before + ms > budget) exhaust(item, index, 'band_budget', place, from + Math.max(0, budget - before), temp, events)
}

/** The reading itself: hard limits, a temperature in no band, freeze-thaw cycles. */
function takeReading(ledger: StabilityLedger, ts: number, temp: number, events: StabilityEvent[]): void {
  const ft = ledger.freeze_thaw
  let thawed = false
  if (temp < 0) ft.below_zero = true
  else if (ft.below_zero) {
    // A cycle: below 0 °C, then back to 0 °C or above.
    ft.below_zero = false
    ft.count += 1
    thawed = true
  }
  const items = ledger.items
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!
    if (item.exhausted !== null) continue
    if ((item.hard_min_c !== null && temp < item.hard_min_c) || (item.hard_max_c !== null && temp > item.hard_max_c)) {
      exhaust(item, i, 'hard_limit', null, ts, temp, events)
    } else if (placeOf(item, temp) === IN_NO_BAND) {
      exhaust(item, i, 'outside_bands', null, ts, temp, events)
    } else if (thawed && item.freeze_thaw_max !== null && ft.count > item.freeze_thaw_max) {
      exhaust(item, i, 'freeze_thaw', null, ts, temp, events)
    }
  }
}

function exhaust(
  item: ItemLedger,
  index: number,
  reason: ExhaustedReason,
  band: number | null,
  at: number,
  temp: number | null,
  events: StabilityEvent[],
): void {
  if (item.exhausted !== null) return
  item.exhausted = { at, reason, band }
  events.push({
    type: 'stability.exhausted',
    key: stabilityEventKey.exhausted(index),
    at,
    data: {
      item: index,
      ndc: item.ndc,
      product_id: item.product_id,
      version: item.version,
      reason,
      band: band === null ? null : bandOf(item.bands[band]!),
      exhausted_at: rfc3339(at),
      temp_c: temp,
    },
  })
}

function bandOf(band: BandLedger): { min_c: number; max_c: number; allowed_s: number } {
  return { min_c: band.min_c, max_c: band.max_c, allowed_s: band.allowed_ms / 1000 }
}

/** Rebuilds a leg's ledger from the ledger it started from and its readings (sorted by ts). */
export function replayLedger(
  start: StabilityLedger,
  readingsSorted: readonly { ts: number; temp_c: number }[],
): { ledger: StabilityLedger; events: StabilityEvent[] } {
  return chargeReadings(structuredClone(start), readingsSorted)
}
