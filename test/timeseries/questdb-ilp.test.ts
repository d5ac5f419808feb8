import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createIlpEncoder } from '../../src/timeseries/questdb-ilp.js'
import type { ReadingRow } from '../../src/timeseries/sink.js'
import { reading } from './sink-contract.js'

const text = (rows: ReadingRow[], encode = createIlpEncoder('readings')) => encode(rows).toString('utf8')

describe('ILP text of readings', () => {
  it('writes symbols, then columns (a null is absent), then the designated timestamp in ns, escaping symbol values', () => {
    const ts = Date.UTC(2025, 0, 1)
    const full = reading({
      ts,
      temp_c: 5,
      battery: 0.5,
      humidity: 41.5,
      lat: 52.52,
      lng: -13.405,
      seq: 42,
      received_at: ts + 1,
      late: true,
    })
    const bare = reading({ ts: ts + 1, tote_id: 'tt a,b=c\\d', delivery_id: null, rx_id: null, temp_c: -2.25 })
    expect(text([full, bare])).toBe(
      `readings,tote_id=tt_contract_a,delivery_id=dl_contract_1,rx_id=rx_contract_1 temp_c=5.0,battery=0.5,humidity=41.5,lat=52.52,lng=-13.405,seq=42i,received_at=${(ts + 1) * 1000}t,late=t ${ts}000000\n` +
        `readings,tote_id=tt\\ a\\,b\\=c\\\\d temp_c=-2.25,received_at=${(ts + 1001) * 1000}t,late=f ${ts + 1}000000\n`,
    )
  })

  it('follows a tote from one delivery to the next, and to none', () => {
    const encode = createIlpEncoder('readings')
    const ts = Date.UTC(2025, 0, 1)
    expect(text([reading({ ts })], encode)).toContain('tote_id=tt_contract_a,delivery_id=dl_contract_1,rx_id=rx_contract_1 ')
    expect(text([reading({ ts, delivery_id: 'dl_2', rx_id: 'rx_2' })], encode)).toContain(
      'tote_id=tt_contract_a,delivery_id=dl_2,rx_id=rx_2 ',
    )
    expect(text([reading({ ts, delivery_id: null, rx_id: null })], encode)).toContain('readings,tote_id=tt_contract_a temp_c=')
  })

  it('writes whole numbers exactly, at every digit boundary', () => {
    const seqs = [0, 9, 10, 9_999_999, 10_000_000, 10_000_001, 100_000_000_000_000, Number.MAX_SAFE_INTEGER]
    const lines = text(seqs.map((seq, i) => reading({ ts: i + 1, seq })))
    expect(lines.match(/seq=\d+i/g)).toEqual(seqs.map((seq) => `seq=${seq}i`))
  })

  it('encodes symbols as UTF-8 and holds lines far longer than usual', () => {
    const long = 'ü'.repeat(5_000)
    const rows = Array.from({ length: 3 }, (_, i) => reading({ ts: i, tote_id: `tt_${long}_${i}` }))
    const body = createIlpEncoder('readings')(rows)
    expect(
      body
        .toString('utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.slice(0, l.indexOf(',delivery_id'))),
    ).toEqual(rows.map((r) => `readings,tote_id=${r.tote_id}`))
  })

  // The encoder writes bytes in place and remembers each tote's symbols between calls; the
  // reference below is the line protocol written plainly, one string a reading.
  it('writes what a plain line-by-line encoding writes, whatever the readings and however they are grouped', () => {
    const escape = (v: string) => v.replace(/[,= \n\r\\]/g, '\\$&')
    const double = (x: number) => (Number.isInteger(x) && Math.abs(x) < 1e21 ? `${x}.0` : String(x))
    const reference = (r: ReadingRow) =>
      `readings,tote_id=${escape(r.tote_id)}` +
      (r.delivery_id === null ? '' : `,delivery_id=${escape(r.delivery_id)}`) +
      (r.rx_id === null ? '' : `,rx_id=${escape(r.rx_id)}`) +
      ` temp_c=${double(r.temp_c)}` +
      (r.battery === null ? '' : `,battery=${double(r.battery)}`) +
      (r.humidity === null ? '' : `,humidity=${double(r.humidity)}`) +
      (r.lat === null ? '' : `,lat=${double(r.lat)}`) +
      (r.lng === null ? '' : `,lng=${double(r.lng)}`) +
      (r.seq === null ? '' : `,seq=${r.seq}i`) +
      `,received_at=${BigInt(r.received_at) * 1000n}t,late=${r.late ? 't' : 'f'} ${BigInt(r.ts) * 1_000_000n}\n`
    const symbol = fc.constantFrom('tt_a', 'tt b', 'tt,c=d', 'tt_é', 'dl_1', 'rx\\1')
    const double_ = fc.double({ noNaN: true, noDefaultInfinity: true })
    const row = fc.record({
      tote_id: symbol,
      delivery_id: fc.option(symbol),
      rx_id: fc.option(symbol),
      ts: fc.integer({ min: 1, max: 253_402_300_799_999 }),
      temp_c: double_,
      battery: fc.option(double_),
      humidity: fc.option(double_),
      lat: fc.option(double_),
      lng: fc.option(double_),
      seq: fc.option(fc.nat({ max: Number.MAX_SAFE_INTEGER })),
      received_at: fc.integer({ min: 1, max: 253_402_300_799_999 }),
      late: fc.boolean(),
    })
    fc.assert(
      fc.property(fc.array(fc.array(row, { maxLength: 20 }), { maxLength: 5 }), (groups) => {
        const encode = createIlpEncoder('readings')
        for (const rows of groups) expect(encode(rows).toString('utf8')).toBe(rows.map(reference).join(''))
      }),
    )
  })
})
