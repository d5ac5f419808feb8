import { z } from 'zod'
import {
  breakReasons,
  coldChainSummarySchema,
  summarize,
  summarizeStability,
  type StabilitySummary,
  temperatureProfileSchema,
  type ColdChainState as EngineState,
} from '../../rules/index.js'
import { storedSignatureSchema } from './e-signature.js'

/**
 * The delivery's `cold_chain` block: the one definition of its shape. The TypeScript types, the
 * initial value, the figures the monitor stores and the OpenAPI component all derive from here.
 */

/** UNMONITORED: the prescription needs no cold chain, so no rule engine judges it. */
export const coldChainStates = ['OK', 'EXCURSION', 'BROKEN', 'UNMONITORED'] as const
export type ColdChainStatus = (typeof coldChainStates)[number]

/** What the monitor keeps in the delivery's `cold_chain` column: the engine's summary, its break flattened. */
export const coldChainFiguresSchema = coldChainSummarySchema.omit({ break: true }).extend({
  state: z
    .enum(coldChainStates)
    .describe('BROKEN once broken (for good); EXCURSION while an announced excursion is open; OK; UNMONITORED without a cold chain'),
  break_reason: z.enum(breakReasons).nullable().describe('Why the cold chain broke; null while it holds'),
  broken_at: z.string().nullable().describe('When it broke (RFC 3339 UTC); null while it holds'),
})
export type ColdChainFigures = z.infer<typeof coldChainFiguresSchema>

const dispositionSchema = z.object({
  decision: z.enum(['release', 'return']),
  note: z.string().nullable(),
  decided_by: z.object({ client_id: z.string(), sub: z.string() }),
  decided_at: z.string(),
  signature: storedSignatureSchema
    .optional()
    .describe('The deciding pharmacist’s e-signature (docs/part11.md); absent on decisions recorded before dispositions were signed'),
})
export type Disposition = z.infer<typeof dispositionSchema>

export const coldChainSchema = z.object({
  required: z.boolean(),
  profile: temperatureProfileSchema.nullable().describe('The temperature profile judged; null without a cold chain'),
  ...coldChainFiguresSchema.shape,
  disposition: dispositionSchema.nullable().describe("The pharmacist's decision on a broken cold chain"),
})
export type ColdChain = z.infer<typeof coldChainSchema>

/** The figures of a delivery no reading has reached yet. */
export function initialColdChain(required: boolean): ColdChainFigures {
  return {
    state: required ? 'OK' : 'UNMONITORED',
    min_c: null,
    max_c: null,
    mkt_c: null,
    time_out_of_range_s: 0,
    unknown_s: 0,
    excursions: [],
    break_reason: null,
    broken_at: null,
  }
}

/** What the delivery's `cold_chain` column holds: the figures, and the stability ledger's summary beside them when its items have products. */
export type StoredColdChain = ColdChainFigures & { stability?: StabilitySummary }

/** The figures the monitor stores, from the rule engine's state. */
export function coldChainFigures(state: EngineState): StoredColdChain {
  const { break: broken, ...summary } = summarize(state)
  const figures: StoredColdChain = { ...summary, break_reason: broken?.reason ?? null, broken_at: broken?.at ?? null }
  if (state.stability) figures.stability = summarizeStability(state.stability)
  return figures
}

/**
 * Stored figures as the API shows them. Figures written before `unknown_s` and `broken_at` were
 * kept lack them; the initial value fills them in.
 */
export function storedFigures(required: boolean, stored: Partial<ColdChainFigures>): ColdChainFigures {
  return { ...initialColdChain(required), ...stored }
}
