import { describe, expect, it } from 'vitest'
import { parseReadings, type ParseResult } from '../../src/telemetry/parse.js'

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0)
const parse = (payload: unknown, now = NOW): ParseResult =>
  parseReadings(Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload)), now)

function readings(payload: unknown) {
  const r = parse(payload)
  if (!r.ok) throw new Error(`expected ok, got ${r.code}: ${r.reason}`)
  return r.readings
}

function rejection(payload: unknown, now = NOW) {
  const r = parse(payload, now)
  if (r.ok) throw new Error('expected a rejection')
  return r
}

describe('a single reading object', () => {
  it('accepts epoch milliseconds and fills absent fields with null', () => {
    expect(readings({ ts: NOW - 1000, temp_c: 4.5 })).toEqual([
      { ts: NOW - 1000, temp_c: 4.5, seq: null, battery: null, humidity: null, lat: null, lng: null },
    ])
  })

  it('accepts an RFC 3339 time with any offset and keeps every optional field', () => {
    const [r] = readings({ ts: '2025-06-01T13:59:30.250+02:00', temp_c: -18, seq: 7, battery: 0.5, humidity: 40, lat: 52.5, lng: 13.4 })
    expect(r).toEqual({ ts: NOW - 29_750, temp_c: -18, seq: 7, battery: 0.5, humidity: 40, lat: 52.5, lng: 13.4 })
  })

  it('accepts nulls for optional fields and ignores members it does not know', () => {
    const [r] = readings({ ts: NOW, temp_c: 5, battery: null, firmware: '1.2.3' })
    expect(r?.battery).toBeNull()
  })

  it.each([
    ['2025-02-30T00:00:00Z', 'a day that does not exist'],
    ['2025-06-01 12:00:00Z', 'a space instead of T'],
    ['2025-06-01T12:00:00', 'no offset'],
    ['2025-06-01T24:00:00Z', 'hour 24'],
    ['2016-12-31T23:59:60Z', 'a leap second'],
    ['yesterday', 'free text'],
  ])('refuses ts %j (%s)', (ts) => {
    expect(rejection({ ts, temp_c: 4 })).toMatchObject({ code: 'invalid_reading', reason: expect.stringContaining('RFC 3339') })
  })
})

describe('wrong types', () => {
  it.each([
    [{ ts: NOW }, 'temp_c'],
    [{ ts: NOW, temp_c: '4.5' }, 'temp_c'],
    [{ temp_c: 4 }, 'ts'],
    [{ ts: NOW + 0.5, temp_c: 4 }, 'ts'],
    [{ ts: NOW, temp_c: 4, battery: 1.5 }, 'battery'],
    [{ ts: NOW, temp_c: 4, seq: -1 }, 'seq'],
    [{ ts: NOW, temp_c: 4, lat: 91 }, 'lat'],
  ])('%j is refused naming %s', (payload, field) => {
    const r = rejection(payload)
    expect(r.code).toBe('invalid_reading')
    expect(r.reason.startsWith(field)).toBe(true)
  })

  it('names the position of the bad reading in a batch', () => {
    const r = rejection([
      { ts: NOW, temp_c: 4 },
      { ts: NOW, temp_c: 'warm' },
    ])
    expect(r.reason).toMatch(/^readings\[1\]\.temp_c:/)
  })

  it.each(['42', '"text"', 'null', 'true'])('refuses the JSON value %s', (payload) => {
    expect(rejection(payload).code).toBe('invalid_reading')
  })

  it('refuses what is not JSON', () => {
    expect(rejection('{"ts": 1, temp_c: 4}')).toEqual({ ok: false, code: 'invalid_json', reason: 'payload is not valid JSON' })
  })
})

describe('physical limits', () => {
  it.each([-90, 80])('accepts the boundary temperature %d °C', (temp_c) => {
    expect(readings({ ts: NOW, temp_c })).toHaveLength(1)
  })

  it.each([-127, -90.1, 80.1, 85])('refuses %d °C as a sensor fault', (temp_c) => {
    expect(rejection({ ts: NOW, temp_c }).code).toBe('temp_out_of_range')
  })

  it('accepts a reading up to 5 minutes ahead of the server clock and refuses one beyond', () => {
    expect(readings({ ts: NOW + 300_000, temp_c: 4 })).toHaveLength(1)
    expect(rejection({ ts: NOW + 300_001, temp_c: 4 }).code).toBe('ts_in_future')
  })

  it('refuses a time before 2000 and hints when it looks like epoch seconds', () => {
    expect(rejection({ ts: '1999-12-31T23:59:59Z', temp_c: 4 }).code).toBe('ts_too_old')
    expect(rejection({ ts: Math.floor(NOW / 1000), temp_c: 4 }).reason).toContain('epoch seconds')
  })
})

describe('batches', () => {
  const batch = (n: number) => Array.from({ length: n }, (_, i) => ({ ts: NOW - i * 1000, temp_c: 5 }))

  it('accepts up to 500 readings in one publish, in the order sent', () => {
    const out = readings(batch(500))
    expect(out).toHaveLength(500)
    expect(out[499]?.ts).toBe(NOW - 499_000)
  })

  it('refuses 501 readings and an empty array', () => {
    expect(rejection(batch(501)).code).toBe('batch_too_large')
    expect(rejection([]).code).toBe('empty_batch')
  })

  it('refuses the whole batch when one reading is bad, so nothing is half stored', () => {
    const payload = batch(3)
    payload[2]!.temp_c = 200
    expect(rejection(payload)).toMatchObject({ code: 'temp_out_of_range', reason: expect.stringMatching(/^readings\[2\]/) })
  })
})

describe('SenML packs (RFC 8428)', () => {
  const bt = NOW / 1000

  it('resolves base name, base time and base unit and groups records by time', () => {
    const pack = [
      { bn: 'urn:dev:tote:tt_1:', bt, bu: 'Cel', n: 'temp', v: 4.25 },
      { n: 'battery', u: '%EL', v: 80 },
      { n: 'humidity', u: '%RH', v: 55 },
      { n: 'temp', t: -60, v: 4.5 },
      { n: 'lat', u: 'lat', t: -60, v: 52.5 },
      { n: 'lon', u: 'lon', t: -60, v: 13.4 },
    ]
    expect(readings(pack)).toEqual([
      { ts: NOW, temp_c: 4.25, seq: null, battery: 0.8, humidity: 55, lat: null, lng: null },
      { ts: NOW - 60_000, temp_c: 4.5, seq: null, battery: null, humidity: null, lat: 52.5, lng: 13.4 },
    ])
  })

  it('reads small times as relative to now and large ones as absolute (§4.5.3)', () => {
    const [relative] = readings([{ n: 'temp', u: 'Cel', t: -30, v: 5 }])
    expect(relative?.ts).toBe(NOW - 30_000)
    const [implicitNow] = readings([{ n: 'temp', u: 'Cel', v: 5 }])
    expect(implicitNow?.ts).toBe(NOW)
    const [absolute] = readings([{ n: 'temp', u: 'Cel', t: bt - 10.5, v: 5 }])
    expect(absolute?.ts).toBe(NOW - 10_500)
  })

  it('adds the base value and converts kelvin', () => {
    const [r] = readings([{ bt, bv: 270, n: 'temp', u: 'K', v: 8.15 }])
    expect(r?.temp_c).toBeCloseTo(5, 9)
  })

  it('ignores measurements it does not store and string values', () => {
    expect(
      readings([
        { bt, n: 'temp', u: 'Cel', v: 3 },
        { n: 'door', vb: true },
        { n: 'pressure', u: 'Pa', v: 101_325 },
      ]),
    ).toHaveLength(1)
  })

  it('refuses a temperature without the Cel unit', () => {
    expect(rejection([{ bt, n: 'temp', v: 39 }])).toMatchObject({ code: 'unsupported_unit', reason: expect.stringContaining('"Cel"') })
    expect(rejection([{ bt, n: 'temp', u: 'degF', v: 39 }]).code).toBe('unsupported_unit')
  })

  it('refuses a time that has measurements but no temp', () => {
    expect(
      rejection([
        { bt, n: 'temp', u: 'Cel', v: 3 },
        { n: 'battery', t: -5, v: 0.5 },
      ]).code,
    ).toBe('invalid_senml')
  })

  it('refuses must-understand labels it does not know (§4.4) and wrong types', () => {
    expect(rejection([{ bt, n: 'temp', u: 'Cel', v: 3, rxt_: 1 }]).reason).toContain('rxt_')
    expect(rejection([{ bt: 'now', n: 'temp', u: 'Cel', v: 3 }])).toMatchObject({
      code: 'invalid_senml',
      reason: expect.stringMatching(/^records\[0\]\.bt/),
    })
  })

  it('applies the same physical limits', () => {
    expect(rejection([{ bt, n: 'temp', u: 'Cel', v: -127 }]).code).toBe('temp_out_of_range')
    expect(rejection([{ bt: bt + 3600, n: 'temp', u: 'Cel', v: 4 }]).code).toBe('ts_in_future')
  })

  it('refuses a pack whose records resolve to more than 500 readings', () => {
    const pack = Array.from({ length: 501 }, (_, i) => ({ bt, n: 'temp', u: 'Cel', t: -i, v: 4 }))
    expect(rejection(pack).code).toBe('batch_too_large')
  })
})
