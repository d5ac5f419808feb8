// The delivery's `stability` block as the ledger sums it up: one zod schema, from which the API's
// response and its OpenAPI come.
import { z } from 'zod'
import { exhaustedReasons, rfc3339 } from './events.js'
import type { BandLedger, StabilityLedger } from './stability-ledger.js'

const bandSummarySchema = z.object({
  min_c: z.number(),
  max_c: z.number(),
  allowed_s: z.number().describe('From the product stability version'),
  add_back_s: z.number().describe('Given back by excursion assessments in force'),
  consumed_s: z.number().describe('Over every leg so far, sensor-gap time charged conservatively'),
  remaining_s: z.number().describe('allowed_s + add_back_s − consumed_s, never below 0'),
  assessments: z
    .array(
      z.object({
        id: z.string(),
        add_back_s: z.number(),
        justification: z.string(),
        signed_by: z
          .object({ name: z.string(), signed_at: z.string(), meaning: z.string() })
          .nullable()
          .describe("The pharmacist's e-signature as shown: printed name, time, meaning; null on an assessment made before signing"),
      }),
    )
    .describe('Excursion assessments in force on this band, over every leg (their add_back_s sum to add_back_s)'),
})

const itemSummarySchema = z.object({
  ndc: z.string(),
  product_id: z.string(),
  version: z.number().int(),
  bands: z.array(bandSummarySchema),
  freeze_thaw: z.object({ count: z.number().int(), max: z.number().int().nullable() }),
  verdict: z.enum(['within', 'exhausted']),
  exhausted_at: z.string().nullable(),
  exhausted_reason: z.enum(exhaustedReasons).nullable(),
})

export const stabilitySummarySchema = z.object({
  items: z.array(itemSummarySchema).describe('Items whose NDC names a product, in the prescription’s order'),
  remaining_fraction: z
    .number()
    .describe('The smallest remaining / (allowed + added back) over every band of every item, 4 decimals; 0 once an item is exhausted'),
  legs: z.array(z.string()).describe('Delivery ids of every leg of the prescription, first leg first'),
})
export type StabilitySummary = z.infer<typeof stabilitySummarySchema>

function remainingMs(band: BandLedger): number {
  return Math.max(0, band.allowed_ms + band.add_back_ms - band.consumed_ms)
}

/** A band with nothing allowed is full until used (0 / 0 is not a fraction). */
function remainingShare(band: BandLedger): number {
  const budget = band.allowed_ms + band.add_back_ms
  return budget === 0 ? (band.consumed_ms === 0 ? 1 : 0) : remainingMs(band) / budget
}

export function summarizeStability(ledger: StabilityLedger, legs: readonly string[] = ledger.legs ?? []): StabilitySummary {
  let fraction = 1
  const items = ledger.items.map((item) => {
    for (const band of item.bands) fraction = Math.min(fraction, remainingShare(band))
    if (item.exhausted !== null) fraction = 0
    return {
      ndc: item.ndc,
      product_id: item.product_id,
      version: item.version,
      bands: item.bands.map((band) => ({
        min_c: band.min_c,
        max_c: band.max_c,
        allowed_s: band.allowed_ms / 1000,
        add_back_s: band.add_back_ms / 1000,
        consumed_s: band.consumed_ms / 1000,
        remaining_s: remainingMs(band) / 1000,
        assessments: (band.assessments ?? []).map((a) => ({ ...a, signed_by: a.signed_by ?? null })),
      })),
      freeze_thaw: { count: ledger.freeze_thaw.count, max: item.freeze_thaw_max },
      verdict: item.exhausted === null ? ('within' as const) : ('exhausted' as const),
      exhausted_at: item.exhausted === null ? null : rfc3339(item.exhausted.at),
      exhausted_reason: item.exhausted?.reason ?? null,
    }
  })
  return { items, remaining_fraction: Math.floor(fraction * 10_000) / 10_000, legs: [...legs] }
}
