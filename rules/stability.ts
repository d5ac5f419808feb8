// A medicine's own stability data (rules/README.md, Stability budgets): its storage range, the
// bands outside it with the total time allowed in each over the whole journey, freeze-thaw and hard
// limits. Plain JSON, as stored on a product's stability version.

export type TemperatureRange = { min_c: number; max_c: number }

/** A temperature interval outside storage and the total time (whole seconds) allowed in it. */
export type BudgetBand = { min_c: number; max_c: number; allowed_s: number }

export type ProductStability = {
  storage: TemperatureRange
  /** 1–6 bands; they may touch storage and each other at an endpoint but not overlap. */
  budgets: BudgetBand[]
  /** Crossings below 0 °C and back tolerated; null: not counted. */
  freeze_thaw_max: number | null
  hard_min_c?: number | null
  hard_max_c?: number | null
  /** The stability data this comes from (label, study, manufacturer letter). */
  source: string
}

/** An item of a delivery and the product stability version it is judged by (the one in force at creation). */
export type ItemStability = { ndc: string; product_id: string; version: number; stability: ProductStability }

/** Who signed an assessment, as every view of it shows (21 CFR 11.50): printed name, time (RFC 3339 UTC), meaning. */
export type AssessmentSigner = { name: string; signed_at: string; meaning: string }

/**
 * Budget a pharmacist gave back to one band of one item (an excursion assessment). `id`,
 * `justification` and `signed_by` are shown with the band; bare ledgers (tests, benchmarks) may leave them out.
 */
export type AddBack = {
  ndc: string
  band: number
  add_back_s: number
  id?: string
  justification?: string
  signed_by?: AssessmentSigner | null
}

/** Most bands a product may have: six cover a freezer-to-hot-car spread in useful steps. */
export const MAX_BUDGET_BANDS = 6

/** Where a temperature falls for one item: in storage, in band `i` (≥ 0), or in no band at all. */
export const IN_STORAGE = -1
export const IN_NO_BAND = -2

/** How far a temperature lies outside a storage range (0 inside it). */
export function distanceFromStorage(storage: TemperatureRange, temp: number): number {
  return temp > storage.max_c ? temp - storage.max_c : temp < storage.min_c ? storage.min_c - temp : 0
}

/**
 * Indexes of the bands, nearest to storage first (ties: product order). A temperature on an
 * endpoint two ranges share belongs to the one nearer storage, storage itself first, so checking
 * in this order gives every temperature exactly one place.
 */
export function bandsNearestFirst(storage: TemperatureRange, bands: readonly BudgetBand[]): number[] {
  const distance = (b: BudgetBand) => (b.min_c >= storage.max_c ? b.min_c - storage.max_c : storage.min_c - b.max_c)
  return bands.map((_, i) => i).sort((a, b) => distance(bands[a]!) - distance(bands[b]!) || a - b)
}
