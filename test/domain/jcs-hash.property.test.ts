// The audit, custody and signature hashes are SHA-256 over RFC 8785 (JCS) text. We write that text
// with safe-stable-stringify; the `canonicalize` package, written for RFC 8785, is the reference.
import { hash } from 'node:crypto'
import canonicalize from 'canonicalize'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { jcsHash } from '../../src/hashing.js'

const referenceHash = (value: unknown) => `sha256:${hash('sha256', canonicalize(value)!)}`

describe('jcsHash', () => {
  it('hashes the same text as the RFC 8785 reference for any JSON value', () => {
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.constantFrom('\\ud800', '\\', '"', '\u2028', '\u20ac', '\u{1F600}'),
    )
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        text,
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer(),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('value'), { maxLength: 5 }),
        fc.dictionary(text, fc.oneof(tie('value'), fc.constant(undefined)), { maxKeys: 6 }),
      ),
    }))
    fc.assert(
      fc.property(json.value, (value) => {
        expect(jcsHash(value)).toBe(referenceHash(value))
      }),
      { numRuns: 2_000 },
    )
  })

  it("gives RFC 8785's own examples", () => {
    // §3.2.2 (numbers, string escapes, literals) and §3.2.3 (member names sorted by UTF-16 code units)
    const values = JSON.parse(String.raw`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }`)
    const canonicalValues = String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
    expect(jcsHash(values)).toBe(`sha256:${hash('sha256', canonicalValues)}`)
    const names = JSON.parse(String.raw`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One",
      "\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`)
    const order = [
      'Carriage Return',
      'One',
      'Control',
      'Latin Small Letter O With Diaeresis',
      'Euro Sign',
      'Emoji: Grinning Face',
      'Hebrew Letter Dalet With Dagesh',
    ]
    const sorted = `{${Object.keys(names)
      .sort((a, b) => order.indexOf(names[a]) - order.indexOf(names[b]))
      .map((k) => `${JSON.stringify(k)}:${JSON.stringify(names[k])}`)
      .join(',')}}`
    expect(jcsHash(names)).toBe(`sha256:${hash('sha256', sorted)}`)
  })

  it('refuses what RFC 8785 cannot canonicalize, as the reference does', () => {
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic.self = cyclic
    for (const value of [{ t: Number.NaN }, [Number.POSITIVE_INFINITY], { s: 'x\ud800' }, { '\udc00': 1 }, ['\ud83d'], cyclic]) {
      expect(() => canonicalize(value)).toThrow()
      expect(() => jcsHash(value)).toThrow()
    }
    // A backslash before "ud800" is text, not an escape; a whole pair is text.
    for (const value of [{ s: '\\ud800' }, { s: '\\\\ud800x' }, { s: '\ud83d\ude00' }]) expect(jcsHash(value)).toBe(referenceHash(value))
  })

  it('writes members left undefined as absent, and dates as their JSON text, like the reference', () => {
    const value = { at: new Date(Date.UTC(2026, 10, 30)), gone: undefined, list: [1, undefined] }
    expect(jcsHash(value)).toBe(referenceHash(value))
    expect(jcsHash(value)).toBe(jcsHash({ at: '2026-11-30T00:00:00.000Z', list: [1, null] }))
  })
})
