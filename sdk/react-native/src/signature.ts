/** A signature as the finger drew it: strokes of points in the pad's own coordinates. */
export type Stroke = readonly { x: number; y: number }[]

const round = (n: number) => Math.round(n * 10) / 10

/**
 * The strokes as an SVG image in a data URL: what `pickup`, `handoff` and `return` take as
 * `signature` (its sha256 becomes the custody event's evidence_hash). SVG keeps it small and
 * needs no canvas, which React Native does not have. Throws on an empty pad.
 */
export function signatureDataUrl(strokes: readonly Stroke[], width: number, height: number): string {
  const drawn = strokes.filter((s) => s.length > 0)
  if (drawn.length === 0) throw new Error('the signature pad is empty')
  const paths = drawn
    .map((s) => {
      const [first, ...rest] = s
      // A tap is a dot: a zero-length line with round caps.
      const moves = rest.length ? rest.map((p) => `L${round(p.x)} ${round(p.y)}`).join('') : `L${round(first!.x)} ${round(first!.y)}`
      return `<path d="M${round(first!.x)} ${round(first!.y)}${moves}"/>`
    })
    .join('')
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">` +
    `<g fill="none" stroke="#000" stroke-width="2.5" stroke-linecap="round" stroke-linejoin="round">${paths}</g></svg>`
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`
}
