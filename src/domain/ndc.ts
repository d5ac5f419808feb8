// National Drug Codes (FDA, 21 CFR 207.33): 10 digits in three segments, labeler-product-package, in
// one of the shapes 4-4-2, 5-3-2 or 5-4-1. HIPAA claims use the 11-digit 5-4-2 form, padding the short
// segment with a leading zero; we store and show that form, with its dashes.

/** The 10-digit shapes with their dashes, and which segment a leading zero pads. */
const SHAPES: { pattern: RegExp; pad: 0 | 1 | 2 }[] = [
  { pattern: /^(\d{4})-(\d{4})-(\d{2})$/, pad: 0 },
  { pattern: /^(\d{5})-(\d{3})-(\d{2})$/, pad: 1 },
  { pattern: /^(\d{5})-(\d{4})-(\d{1})$/, pad: 2 },
]
const ELEVEN_DASHED = /^(\d{5})-(\d{4})-(\d{2})$/
const ELEVEN_PLAIN = /^(\d{5})(\d{4})(\d{2})$/

/**
 * The 11-digit 5-4-2 form of an NDC given as 10 digits with dashes (4-4-2, 5-3-2, 5-4-1) or 11 digits
 * with or without dashes; null for anything else. Ten digits without dashes are refused: which segment
 * to pad is unknowable without them.
 */
export function normalizeNdc(text: string): string | null {
  const eleven = ELEVEN_DASHED.exec(text) ?? ELEVEN_PLAIN.exec(text)
  if (eleven) return `${eleven[1]}-${eleven[2]}-${eleven[3]}`
  for (const { pattern, pad } of SHAPES) {
    const m = pattern.exec(text)
    if (!m) continue
    const segments = [m[1]!, m[2]!, m[3]!]
    segments[pad] = `0${segments[pad]}`
    return segments.join('-')
  }
  return null
}

export const NDC_SHAPES_HELP = 'must be an NDC: 10 digits as 4-4-2, 5-3-2 or 5-4-1 with dashes, or 11 digits (5-4-2, dashes optional)'
