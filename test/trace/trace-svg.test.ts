import { describe, expect, it } from 'vitest'
import { builtInProfiles } from '../../rules/index.js'
import { traceCsv } from '../../src/timeseries/trace-csv.js'
import { traceSvg } from '../../src/timeseries/trace-svg.js'
import type { TemperatureTrace } from '../../src/timeseries/trace.js'

const trace = (over: Partial<TemperatureTrace> = {}): TemperatureTrace => ({
  delivery_id: 'dl_01jd0000000000000000000000',
  rx_id: 'rx_01jd0000000000000000000000',
  unit: 'Cel',
  profile: { ...builtInProfiles.refrigerated },
  from: '2026-03-01T08:00:00.000Z',
  to: '2026-03-01T10:00:00.000Z',
  step_s: 60,
  points: [{ t: '2026-03-01T08:00:00.000Z', min: 4.8, max: 5.2, avg: 5, n: 3 }],
  excursions: [],
  summary: { min_c: 4.8, max_c: 5.2, mkt_c: 5, time_out_of_range_s: 0, unknown_s: 0, as_of: '2026-03-01T10:00:00.000Z', scope: 'delivery' },
  ...over,
})

describe('the trace chart and CSV', () => {
  it('escapes every text it shows', () => {
    const svg = traceSvg(trace(), { timeZone: 'UTC', status: '<script>alert("x")</script>', coldChainState: 'OK & "fine"' })
    expect(svg).not.toContain('<script>')
    expect(svg).toContain('&#60;script&#62;')
    expect(svg).toContain('OK &#38; &#34;fine&#34;')
  })

  it('draws a single reading, a profile without hard limits and an open excursion without NaN', () => {
    const svg = traceSvg(
      trace({
        profile: { ...builtInProfiles.refrigerated, hard_min_c: null },
        excursions: [{ started_at: '2026-03-01T08:30:00.000Z', ended_at: null, duration_s: 120, peak_c: 9.5, kind: 'high' }],
      }),
      { timeZone: 'UTC', status: 'PICKED_UP', coldChainState: 'EXCURSION' },
    )
    expect(svg).not.toMatch(/NaN|Infinity|undefined/)
    expect(svg).toContain('class="excursion"')
    expect(svg).not.toContain('class="hard-limit"')
  })

  it('labels a window of a few minutes in seconds and one of days by date', () => {
    const short = traceSvg(trace({ to: '2026-03-01T08:01:00.000Z', step_s: 1 }), {
      timeZone: 'UTC',
      status: 'DISPATCHED',
      coldChainState: 'OK',
    })
    expect(short).toContain('>08:00:10<')
    const long = traceSvg(trace({ to: '2026-03-09T08:00:00.000Z', step_s: 3600 }), {
      timeZone: 'UTC',
      status: 'DISPATCHED',
      coldChainState: 'OK',
    })
    expect(long).toContain('>03-03<')
    expect(long).toContain('time (UTC), 2026-03-01 – 2026-03-09')
  })

  it("reads its clock in the pharmacy's time zone, as the console does, not in UTC", () => {
    // 08:00–10:00 UTC on 1 March is 02:00–04:00 in Chicago (CST, UTC−6).
    const svg = traceSvg(trace(), { timeZone: 'America/Chicago', status: 'DISPATCHED', coldChainState: 'OK' })
    expect(svg).toContain('>02:00<')
    expect(svg).toContain('>03:45<')
    expect(svg).toContain('as of 04:00 CST')
    expect(svg).toContain('time (America/Chicago, CST), 2026-03-01')
    expect(svg).not.toContain('UTC')
    // Hourly ticks fall on whole local hours in a zone half an hour off UTC: 08:00 UTC is 13:30 in Kolkata.
    const kolkata = traceSvg(trace({ to: '2026-03-01T14:00:00.000Z' }), {
      timeZone: 'Asia/Kolkata',
      status: 'DISPATCHED',
      coldChainState: 'OK',
    })
    expect(kolkata).toContain('>14:00<')
    expect(kolkata).toContain('>19:00<')
    expect(kolkata).not.toContain('>13:30<')
  })

  it('writes an empty trace as the CSV header alone', () => {
    expect(traceCsv(trace({ points: [] }))).toBe('t,min_c,max_c,avg_c,n\r\n')
  })
})
