import { fc, test } from '@fast-check/vitest'
import epcTdsModule from 'epc-tds'
import { describe, expect, it } from 'vitest'
import { gs1CheckDigit, gs1CheckDigitHolds, gtinFromNdc, gtinOf, isGln, ndc10, sglnOf, sgtin, sgtinClass } from '../../src/domain/gs1.js'

// A CommonJS module whose types declare a default export: Node hands its exports over as the default.
const epcTds = ((epcTdsModule as unknown as { default?: typeof epcTdsModule.default }).default ??
  epcTdsModule) as typeof epcTdsModule.default

/** GS1 keys whose check digits are published: Wikipedia's EAN-13 and UPC-A examples, GS1's example GTIN. */
const PUBLISHED = ['4006381333931', '036000291452', '09521234543213', '73513537']

describe('GS1 check digits', () => {
  it.each(PUBLISHED)('hold for the published key %s', (code) => {
    expect(gs1CheckDigitHolds(code)).toBe(true)
    expect(gs1CheckDigit(code.slice(0, -1))).toBe(Number(code.at(-1)))
  })

  test.prop([fc.stringMatching(/^\d{12}$/)])('agree with epc-tds, an independent implementation', (body) => {
    expect(gs1CheckDigit(body)).toBe(epcTds.Utils.computeCheckDigit(body))
  })

  test.prop([fc.stringMatching(/^\d{13}$/), fc.nat(12), fc.integer({ min: 1, max: 9 })])(
    'catch every single mistyped digit',
    (body, position, delta) => {
      const code = body + gs1CheckDigit(body)
      const typo = code.slice(0, position) + ((Number(code[position]) + delta) % 10) + code.slice(position + 1)
      expect(gs1CheckDigitHolds(typo)).toBe(false)
    },
  )

  it('refuse a GLN with a wrong check digit or length', () => {
    expect(isGln('4006381333931')).toBe(true)
    expect(isGln('4006381333932')).toBe(false)
    expect(isGln('400638133393')).toBe(false)
  })
})

describe('NDCs as GTINs (GS1 US: 0 + 03 + the ten NDC digits + check digit)', () => {
  it('maps every NDC shape to the same GTIN-14', () => {
    for (const ndc of ['0002-8215-01', '00002-8215-01', '00002821501', '0002821501']) {
      expect(gtinFromNdc(ndc)).toEqual({ gtin: '00300028215012', companyPrefixLength: 6 })
    }
    expect(gtinFromNdc('50090-123-45')).toEqual({ gtin: `0035009012345${gs1CheckDigit('0035009012345')}`, companyPrefixLength: 7 })
    expect(ndc10('50090-0123-45')).toEqual({ digits: '5009012345', labelerLength: 5 })
    expect(ndc10('50090-1234-05')).toEqual({ digits: '5009012345', labelerLength: 5 })
    expect(ndc10('50090-1234-55')).toBeNull()
  })

  test.prop([fc.stringMatching(/^[1-9]\d{4}$/), fc.stringMatching(/^\d{3}$/), fc.stringMatching(/^\d{2}$/)])(
    'a 5-3-2 NDC and its 11-digit form name one GTIN',
    (labeler, product, pack) => {
      expect(gtinFromNdc(`${labeler}-0${product}-${pack}`)).toEqual(gtinFromNdc(`${labeler}-${product}-${pack}`))
    },
  )

  test.prop([fc.stringMatching(/^\d{13}$/), fc.integer({ min: 6, max: 11 }), fc.integer({ min: 0, max: 2 ** 38 - 1 })])(
    'EPC URIs agree with epc-tds for every company prefix length',
    (body, prefixLength, serial) => {
      const gtin = { gtin: body + gs1CheckDigit(body), companyPrefixLength: prefixLength }
      const reference = new epcTds.Sgtin96()
      reference.setPartition(12 - prefixLength)
      reference.setGtin(gtin.gtin)
      reference.setSerial(serial)
      expect(sgtin(gtin, String(serial))).toBe(reference.toIdURI())
      expect(sgtinClass(gtin)).toBe(
        reference
          .toIdURI()
          .replace('urn:epc:id:', 'urn:epc:idpat:')
          .replace(/\.\d+$/, '.*'),
      )
      const gln = body.slice(1) + gs1CheckDigit(body.slice(1))
      const place = new epcTds.Sgln96()
      place.setPartition(12 - prefixLength)
      place.setGln(gln)
      place.setExtension(0)
      expect(sglnOf(gln, prefixLength)).toBe(place.toIdURI())
    },
  )

  it('reads the company prefix of a US drug GTIN from its labeler code, and escapes serials', () => {
    expect(sgtinClass(gtinOf('00300028215012')!)).toBe('urn:epc:idpat:sgtin:030002.0821501.*')
    expect(sgtin(gtinOf('00300028215012')!, 'A/B%1')).toBe('urn:epc:id:sgtin:030002.0821501.A%2FB%251')
    expect(gtinOf('4006381333931')).toEqual({ gtin: '04006381333931', companyPrefixLength: 7 })
    expect(gtinOf('4006381333932')).toBeNull()
  })
})
