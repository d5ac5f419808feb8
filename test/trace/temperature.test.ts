import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { dispatchedColdChain, feed } from './cold-chain-delivery.js'

const MINUTE = 60_000

describe("the pharmacist's temperature trace", () => {
  let api: TestApi
  let admin: string
  // Dispatched two to three hours ago on a whole hour, so buckets of any step up to 1 h line up with the trip.
  const start = Math.floor((Date.now() - 2 * 60 * MINUTE) / (60 * MINUTE)) * 60 * MINUTE
  // The service (and its signing key) starts before the trip, as it would have in real life.
  const clock = testClock(start - 10 * MINUTE)
  let trip: Awaited<ReturnType<typeof dispatchedColdChain>>
  const path = () => `/v1/deliveries/${trip.deliveryId}/temperature`

  beforeAll(async () => {
    api = await startTestService({}, { clock })
    trip = await dispatchedColdChain(api, clock, start)
    // One reading every 20 s for an hour: 5.0/5.3/5.6 °C in each minute, then from minute 20 on 12 °C
    // (grace 5 min, so an excursion; longer than 30 min, so a break).
    const readings = Array.from({ length: 180 }, (_, i) => ({ ts: start + i * 20_000, temp_c: i >= 60 ? 12 : 5 + (i % 3) * 0.3 }))
    await feed(api, trip.tote.id, readings)
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('buckets the readings by step with n, min, max and avg', async () => {
    const res = await api.get(path(), admin)
    expect(res.status, res.text).toBe(200)
    const trace = res.body
    expect(trace).toMatchObject({ delivery_id: trip.deliveryId, unit: 'Cel', from: new Date(start).toISOString(), step_s: 60 })
    expect(trace.profile).toMatchObject({ name: 'refrigerated', min_c: 2, max_c: 8, hard_min_c: 0 })
    expect(trace.points).toHaveLength(60)
    expect(trace.points[0]).toEqual({ t: new Date(start).toISOString(), min: 5, max: 5.6, avg: 5.3, n: 3 })
    expect(trace.points[30]).toEqual({ t: new Date(start + 30 * MINUTE).toISOString(), min: 12, max: 12, avg: 12, n: 3 })

    const fiveMinutes = (await api.get(`${path()}?step=5m`, admin)).body
    expect(fiveMinutes.points).toHaveLength(12)
    expect(fiveMinutes.points[0]).toMatchObject({ min: 5, max: 5.6, avg: 5.3, n: 15 })
  })

  it('takes excursions and the summary from the delivery the rule engine keeps current', async () => {
    const trace = (await api.get(path(), admin)).body
    const delivery = (await api.get(`/v1/deliveries/${trip.deliveryId}`, admin)).body
    // The tote went silent after its last reading (start + 59:40): past max_gap_s (15 min) the
    // time since is unknown, and counts as out of range up to as_of (now).
    const unknownFrom = start + 59 * MINUTE + 40_000 + 15 * MINUTE
    const silenceS = (clock.now() - unknownFrom) / 1000
    expect(trace.summary).toEqual({
      min_c: 5,
      max_c: 12,
      mkt_c: delivery.cold_chain.mkt_c,
      time_out_of_range_s: delivery.cold_chain.time_out_of_range_s + silenceS,
      unknown_s: delivery.cold_chain.unknown_s + silenceS,
      as_of: new Date(clock.now()).toISOString(),
      scope: 'delivery',
    })
    expect(trace.summary.time_out_of_range_s).toBeGreaterThan(30 * 60)
    expect(trace.excursions).toHaveLength(2)
    expect(trace.excursions[0]).toMatchObject({ started_at: new Date(start + 20 * MINUTE).toISOString(), peak_c: 12 })
    expect(trace.excursions[1]).toEqual({
      started_at: new Date(unknownFrom).toISOString(),
      ended_at: null,
      duration_s: silenceS,
      peak_c: null,
      kind: 'unknown',
    })
  })

  it('computes min and max from the points of a narrower window, and says so', async () => {
    const from = new Date(start).toISOString()
    const to = new Date(start + 10 * MINUTE).toISOString()
    const trace = (await api.get(`${path()}?from=${from}&to=${to}`, admin)).body
    expect(trace.points).toHaveLength(11) // the end is included: 10:00 starts an 11th bucket
    expect(trace.summary).toMatchObject({ min_c: 5, max_c: 5.6, scope: 'window' })
    expect(trace.excursions).toEqual([]) // the excursion starts after this window
  })

  it('answers CSV for Accept: text/csv (RFC 4180)', async () => {
    const res = await api.request('GET', `${path()}?step=30m`, { token: admin, headers: { accept: 'text/csv' } })
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/)
    expect(res.text).toBe(
      [
        't,min_c,max_c,avg_c,n',
        `${new Date(start).toISOString()},5,12,7.53,90`,
        `${new Date(start + 30 * MINUTE).toISOString()},12,12,12,90`,
        '',
      ].join('\r\n'),
    )
    // A browser's Accept (JSON not named, */* last) still gets JSON.
    const json = await api.request('GET', path(), { token: admin, headers: { accept: 'application/json, */*;q=0.8' } })
    expect(json.headers.get('content-type')).toMatch(/^application\/json/)
  })

  it('draws an SVG chart with the allowed band and the excursion', async () => {
    const res = await api.get(`${path()}.svg`, admin)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^image\/svg\+xml/)
    const svg = res.text
    expect(svg.startsWith('<svg')).toBe(true)
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true)
    expect(svg).toMatch(/<rect class="band"[^>]*>/)
    expect(svg).toMatch(/<rect class="excursion"[^>]*>/)
    expect(svg).toContain('class="hard-limit"')
    expect(svg).toContain(trip.deliveryId)
    expect(svg).toContain('BROKEN')
    expect(svg).toMatch(/time \(America\/Chicago, C[SD]T/) // the pharmacy's clock (test/helpers/service.ts), as the console reads it
    expect(svg).not.toMatch(/NaN|Infinity|undefined/)
    expect(unbalancedTags(svg)).toEqual([])
  })

  it('draws "no readings yet" for a delivery without readings', async () => {
    const quiet = await dispatchedColdChain(api, clock, Date.now() - 5 * MINUTE)
    const trace = (await api.get(`/v1/deliveries/${quiet.deliveryId}/temperature`, admin)).body
    expect(trace.points).toEqual([])
    expect(trace.summary).toMatchObject({ min_c: null, max_c: null, mkt_c: null })
    const svg = (await api.get(`/v1/deliveries/${quiet.deliveryId}/temperature.svg`, admin)).text
    expect(svg).toContain('no readings yet')
    expect(svg).not.toMatch(/NaN|Infinity/)
  })

  it('counts a silent tote\'s unknown time: 28 minutes without a reading is not "OK, 0 s out of range"', async () => {
    const silent = await dispatchedColdChain(api, clock, clock.now() - 40 * MINUTE)
    const dispatchedAt = clock.now() - 40 * MINUTE
    // Twelve minutes of good readings, then nothing for 28 minutes: 13 of them past max_gap_s (15 min).
    await feed(
      api,
      silent.tote.id,
      Array.from({ length: 12 }, (_, i) => ({ ts: dispatchedAt + (i + 1) * MINUTE, temp_c: 5 })),
    )
    const delivery = (await api.get(`/v1/deliveries/${silent.deliveryId}`, admin)).body
    expect(delivery.cold_chain).toMatchObject({ state: 'OK', time_out_of_range_s: 0 }) // what the rule engine has evaluated so far
    const trace = (await api.get(`/v1/deliveries/${silent.deliveryId}/temperature`, admin)).body
    expect(trace.summary).toMatchObject({ time_out_of_range_s: 13 * 60, unknown_s: 13 * 60, as_of: new Date(clock.now()).toISOString() })
    expect(trace.excursions).toEqual([
      {
        started_at: new Date(dispatchedAt + 27 * MINUTE).toISOString(),
        ended_at: null,
        duration_s: 13 * 60,
        peak_c: null,
        kind: 'unknown',
      },
    ])
    const svg = (await api.get(`/v1/deliveries/${silent.deliveryId}/temperature.svg`, admin)).text
    expect(svg).not.toContain('out of range 0 s')
    expect(svg).toContain('out of range 13 min (unknown 13 min)')
    expect(svg).toContain('NO SIGNAL')
    expect(svg).toMatch(/<rect class="excursion unknown"/)
  })

  it('lists each silence once, sorted and disjoint, the short ones within grace too', async () => {
    const dispatchedAt = Math.floor((clock.now() - 90 * MINUTE) / MINUTE) * MINUTE
    const gappy = await dispatchedColdChain(api, clock, dispatchedAt)
    const at = (m: number) => dispatchedAt + m * MINUTE
    // Good readings each minute, with two silences: 17 min (2 past max_gap_s, within grace_s: not
    // an excursion) and 25 min (10 past max_gap_s: the rule engine lists it as an excursion).
    const minutes = [...range(1, 10), ...range(27, 35), ...range(60, 85)]
    await feed(
      api,
      gappy.tote.id,
      minutes.map((m) => ({ ts: at(m), temp_c: 5 })),
    )
    const trace = (await api.get(`/v1/deliveries/${gappy.deliveryId}/temperature`, admin)).body
    const silences = trace.excursions.filter((e: { kind: string }) => e.kind === 'unknown')
    // The short one is seen between minute buckets (known to the end of the last reading's
    // bucket); the long one is the rule engine's, to the second, with the buckets' account merged in.
    expect(silences).toEqual([
      {
        started_at: new Date(at(26)).toISOString(),
        ended_at: new Date(at(27)).toISOString(),
        duration_s: 60,
        peak_c: null,
        kind: 'unknown',
      },
      {
        started_at: new Date(at(50)).toISOString(),
        ended_at: new Date(at(60)).toISOString(),
        duration_s: 600,
        peak_c: null,
        kind: 'unknown',
      },
    ])
  })

  it('ends an open trace at its newest reading when the tote runs ahead of the clock, so no break lies past the chart', async () => {
    const ahead = await dispatchedColdChain(api, clock, clock.now() - 10 * MINUTE)
    const now = clock.now()
    // Readings are accepted up to 5 min ahead: a frozen tote, its clock 4 minutes fast.
    await feed(api, ahead.tote.id, [
      { ts: now - 5 * MINUTE, temp_c: 5 },
      { ts: now + 3 * MINUTE, temp_c: -2 },
      { ts: now + 4 * MINUTE, temp_c: -2 },
    ])
    const delivery = (await api.get(`/v1/deliveries/${ahead.deliveryId}`, admin)).body
    expect(delivery.cold_chain).toMatchObject({
      state: 'BROKEN',
      break_reason: 'hard_limit',
      broken_at: new Date(now + 3 * MINUTE).toISOString(),
    })
    const trace = (await api.get(`/v1/deliveries/${ahead.deliveryId}/temperature`, admin)).body
    expect(trace.to).toBe(new Date(now + 4 * MINUTE).toISOString())
    expect(trace.summary.as_of).toBe(trace.to)
    expect(trace.points.map((p: { min: number }) => p.min)).toEqual([5, -2, -2])
    const svg = (await api.get(`/v1/deliveries/${ahead.deliveryId}/temperature.svg`, admin)).text
    const marker = /<g class="break" data-at="([^"]+)"><line x1="([\d.]+)"/.exec(svg)
    expect(marker?.[1]).toBe(new Date(now + 3 * MINUTE).toISOString())
    expect(Number(marker?.[2])).toBeLessThan(876) // inside the plot, before its right edge (the as-of end)
    expect(svg).toContain('BREAK: hard limit crossed')
  })

  it('names the prescription in the chart title, not only the delivery', async () => {
    const svg = (await api.get(`${path()}.svg`, admin)).text
    expect(svg).toContain(`>Rx ${trip.rx.rx_id}<`)
    expect(svg).toContain(`aria-label="Temperature trace of prescription ${trip.rx.rx_id}`)
  })

  it('refuses a step that is too small or makes too many points', async () => {
    for (const step of ['500ms', 'soon', '0s']) {
      const res = await api.get(`${path()}?step=${step}`, admin)
      expect(res.status, step).toBe(422)
      expect(res.body.errors[0].pointer).toBe('/query/step')
    }
    const from = new Date(start - 3 * 60 * MINUTE).toISOString()
    const tooMany = await api.get(`${path()}?step=1s&from=${from}`, admin)
    expect(tooMany.status).toBe(422)
    expect(tooMany.body.errors[0]).toMatchObject({ pointer: '/query/step' })
    expect(tooMany.body.errors[0].message).toMatch(/at most 10000/)
    const backwards = await api.get(`${path()}?from=${new Date(start + MINUTE).toISOString()}&to=${new Date(start).toISOString()}`, admin)
    expect(backwards.status).toBe(422)
    expect(backwards.body.errors[0].pointer).toBe('/query/to')
  })

  it("answers 404 for another pharmacy's delivery and 403 without telemetry:read", async () => {
    const other = await api.pharmacy(admin, { name: 'Elsewhere Pharmacy' })
    const client = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'Elsewhere back office',
        grant_types: ['client_credentials'],
        scope: 'telemetry:read deliveries:read',
        pharmacy_id: other.id,
      })
    ).body
    const outsider = await api.tokenFor(client.client_id, client.client_secret)
    expect((await api.get(path(), outsider)).status).toBe(404)
    expect((await api.get(`${path()}.svg`, outsider)).status).toBe(404)
    expect((await api.get(path(), await api.adminToken('deliveries:read'))).status).toBe(403)
  })

  it('is described in the OpenAPI document with its JSON, CSV and SVG answers', async () => {
    const doc = (await api.request('GET', '/v1/openapi.json')).body
    const trace = doc.paths['/v1/deliveries/{id}/temperature'].get
    expect(Object.keys(trace.responses['200'].content)).toEqual(['application/json', 'text/csv'])
    expect(trace.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(['id', 'from', 'to', 'step']))
    expect(Object.keys(doc.paths['/v1/deliveries/{id}/temperature.svg'].get.responses['200'].content)).toEqual(['image/svg+xml'])
  })
})

/** Whole minutes from `first` to `last`, both included. */
const range = (first: number, last: number) => Array.from({ length: last - first + 1 }, (_, i) => first + i)

/** Tags that are not closed in order (a cheap well-formedness check): [] for a balanced document. */
function unbalancedTags(xml: string): string[] {
  const open: string[] = []
  const wrong: string[] = []
  for (const [tag, closing, name, selfClosing] of xml.matchAll(/<(\/?)([a-zA-Z][\w-]*)[^>]*?(\/?)>/g)) {
    if (selfClosing) continue
    if (!closing) open.push(name!)
    else if (open.pop() !== name) wrong.push(tag)
  }
  return [...wrong, ...open]
}
