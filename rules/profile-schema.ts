// zod schema for a custom temperature profile in API requests (`temperature_profile`; rules/README.md, Built-in profiles).
// It checks the same consistency rules as resolveProfile, so a request that passes the schema
// resolves without a ProfileError; the route still calls resolveProfile to fill the defaults.
import { z } from 'zod'
import { CUSTOM_PROFILE_DEFAULTS as D, ProfileError, resolveProfile } from './profile.js'

const seconds = (what: string, def: number) => z.number().nonnegative().optional().describe(`${what}, in seconds. Default ${def}.`)

export const customProfileSchema = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe(`A label for this profile. Default '${D.name}'. Built-in names are only accepted with the built-in values.`),
    min_c: z.number().describe('Lowest allowed temperature, °C (inclusive).'),
    max_c: z.number().describe('Highest allowed temperature, °C (inclusive). Must be above min_c.'),
    grace_s: seconds('How long a reading may stay out of range before it counts as an excursion', D.grace_s),
    max_excursion_s: seconds('One excursion longer than this breaks the cold chain', D.max_excursion_s),
    max_cumulative_s: seconds(
      'Total time out of range (grace and sensor gaps included) allowed per delivery before the cold chain breaks',
      D.max_cumulative_s,
    ),
    hard_min_c: z
      .number()
      .nullable()
      .optional()
      .describe('Any reading below this breaks the cold chain at once (e.g. freezing insulin). At most min_c; null or absent = none.'),
    hard_max_c: z
      .number()
      .nullable()
      .optional()
      .describe('Any reading above this breaks the cold chain at once. At least max_c; null or absent = none.'),
    mkt_max_c: z
      .number()
      .nullable()
      .optional()
      .describe(
        'Mean kinetic temperature limit, °C (USP <1079.2>, ΔH = 83.144 kJ/mol), judged once readings cover one hour. Null or absent = not judged.',
      ),
    max_gap_s: z
      .number()
      .positive()
      .nullable()
      .optional()
      .describe(
        `Sensor silence longer than this is a sensor gap; the unknown time counts as out of range. Default ${D.max_gap_s}; null = no gap detection.`,
      ),
  })
  .superRefine((input, ctx) => {
    try {
      resolveProfile(input)
    } catch (err) {
      if (!(err instanceof ProfileError)) throw err
      ctx.addIssue({ code: 'custom', message: err.message, path: err.field ? [err.field] : [] })
    }
  })
  .describe('A custom temperature profile (SPEC §5). Omitted optional members take the documented defaults.')

export type CustomProfile = z.infer<typeof customProfileSchema>
