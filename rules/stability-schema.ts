// A product's stability data as the API accepts it (zod v4): the shape, and the rules that make a set
// of bands mean one thing for every temperature (rules/README.md, Stability budgets).
import { z } from 'zod'
import { MAX_BUDGET_BANDS, type BudgetBand, type TemperatureRange } from './stability.js'

// −100…+100 °C covers dry ice to a closed car in the sun; beyond is a typo.
const celsius = z.number().min(-100).max(100)
// Ten years in seconds: far beyond any product's shelf life.
const MAX_ALLOWED_S = 315_360_000

const range = z.strictObject({ min_c: celsius, max_c: celsius })
const band = z.strictObject({
  min_c: celsius,
  max_c: celsius,
  allowed_s: z.number().int().min(0).max(MAX_ALLOWED_S).describe('Total time allowed in this band over the whole journey, seconds'),
})

/** Open intervals intersect: ranges may touch at an endpoint, never share more. */
const overlaps = (a: TemperatureRange, b: TemperatureRange) => a.min_c < b.max_c && b.min_c < a.max_c

export const productStabilitySchema = z
  .strictObject({
    storage: range.describe('The labelled storage range; time in it costs nothing'),
    budgets: z
      .array(band)
      .min(1)
      .max(MAX_BUDGET_BANDS)
      .describe('1–6 bands outside storage; they may touch storage and each other at an endpoint but not overlap'),
    freeze_thaw_max: z.number().int().min(0).max(1000).nullable().describe('Freeze-thaw cycles tolerated; null: not counted'),
    hard_min_c: celsius.nullable().optional().describe('A reading below it exhausts the item at once'),
    hard_max_c: celsius.nullable().optional().describe('A reading above it exhausts the item at once'),
    source: z.string().min(1).max(500).describe('The stability data this comes from (label section, study, manufacturer letter)'),
  })
  .superRefine((s, ctx) => {
    const bad = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message })
    if (!(s.storage.min_c < s.storage.max_c)) bad(['storage', 'max_c'], 'must be above storage.min_c')
    s.budgets.forEach((b: BudgetBand, i) => {
      if (!(b.min_c < b.max_c)) return bad(['budgets', i, 'max_c'], 'must be above min_c')
      if (overlaps(b, s.storage)) return bad(['budgets', i], 'overlaps the storage range (bands may only touch it at an endpoint)')
      const j = s.budgets.findIndex((other, k) => k < i && other.min_c < other.max_c && overlaps(b, other))
      if (j >= 0) bad(['budgets', i], `overlaps band ${j} (bands may only touch at an endpoint)`)
    })
    if (s.hard_min_c != null && !(s.hard_min_c < s.storage.min_c)) bad(['hard_min_c'], 'must be below storage.min_c')
    if (s.hard_max_c != null && !(s.hard_max_c > s.storage.max_c)) bad(['hard_max_c'], 'must be above storage.max_c')
  })
