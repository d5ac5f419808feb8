import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { csvLine } from '../../src/api/csv-cells.js'

/** The cells of one CSV line as a spreadsheet reads them (RFC 4180). */
function cellsOf(line: string): string[] {
  const cells: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') ((cell += '"'), i++)
      else if (ch === '"') quoted = false
      else cell += ch
    } else if (ch === '"') quoted = true
    else if (ch === ',') (cells.push(cell), (cell = ''))
    else cell += ch
  }
  cells.push(cell)
  return cells
}

const FORMULA = /^[=+\-@\t\r]/

describe('audit CSV cells', () => {
  it('never begin with a formula character, and keep the value after the guard', () => {
    const value = fc.oneof(fc.string(), fc.constantFrom('=1+1', '+1', '-1-1:x', '@SUM(A1)', '\t=x', 'a,"b"\r\nc'))
    fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 6 }), (values) => {
        const line = csvLine(values)
        expect(line.endsWith('\r\n')).toBe(true)
        const cells = cellsOf(line.slice(0, -2))
        expect(cells).toHaveLength(values.length)
        cells.forEach((cell, i) => {
          expect(FORMULA.test(cell)).toBe(false)
          expect(cell).toBe(FORMULA.test(values[i]!) ? `'${values[i]}` : values[i])
        })
      }),
    )
  })
})
