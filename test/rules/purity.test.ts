import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

/**
 * The rule engine is pure (issue 3, point 6): readings and a profile in, state and events out.
 * Its modules may import each other, their profile data and zod, and nothing that does I/O; time
 * comes in as arguments, never from the clock, and nothing is random.
 */
const dir = new URL('../../rules/', import.meta.url)
const modules = readdirSync(dir).filter((name) => name.endsWith('.ts'))
const ALLOWED_PACKAGES = new Set(['zod'])

describe('the rules/ modules', () => {
  it('are there to check', () => {
    expect(modules).toEqual(expect.arrayContaining(['engine.ts', 'late.ts', 'silence.ts', 'reorder.ts']))
  })

  for (const name of modules) {
    it(`${name} imports only rules/ modules, profile data and zod, and reads no clock`, () => {
      const source = readFileSync(new URL(name, dir), 'utf8')
      const specifiers = [...source.matchAll(/(?:from\s+|import\s*\(\s*|require\s*\(\s*)['"]([^'"]+)['"]/g)].map((m) => m[1]!)
      const outside = specifiers.filter((s) => !(s.startsWith('./') && !s.includes('..')) && !ALLOWED_PACKAGES.has(s))
      expect(outside).toEqual([])
      expect(source).not.toMatch(/\b(Date\.now|new Date\(\s*\)|performance\.now|Math\.random|process\.|setTimeout|setInterval|fetch)\b/)
    })
  }
})
