import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

// GET /metrics (Prometheus text): the series an operator's dashboards and alerts read exist and
// move with what the service does — readings ingested and rejected, rule evaluation latency,
// HTTP requests by route template (never a raw path with ids in it) and status.

/** `name{labels} value` lines of the exposition, summed per name and label set. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^(rxtrace_\w+(?:\{[^}]*\})?) (\S+)$/.exec(line)
    if (m) out.set(m[1]!, Number(m[2]))
  }
  return out
}

describe('GET /metrics', () => {
  let api: TestApi
  let admin: string
  const scrape = async () => {
    const res = await api.request('GET', '/metrics')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/)
    return { text: res.text, series: samples(res.text) }
  }
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('counts readings ingested and rejected (by reason), and times the rule evaluation', async () => {
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true })
    const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
      fleet_id: fleetId,
      driver_id: driverId,
      tote_id: tote.id,
    })
    expect(dispatched.status, dispatched.text).toBe(200)
    const before = (await scrape()).series
    const now = Date.now()
    const readings = [0, 1, 2].map((i) => ({ ts: now - (3 - i) * 10_000, temp_c: 4.5 }))
    await api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify(readings)))
    await expect(api.service.pipeline.handle(tote.id, Buffer.from('not json'))).rejects.toThrow(/not valid JSON/)
    await expect(api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify({ ts: now, temp_c: 'warm' })))).rejects.toThrow()
    await api.service.monitor.flush()

    await expect
      .poll(async () => (await scrape()).series.get('rxtrace_readings_ingested_total'))
      .toBe((before.get('rxtrace_readings_ingested_total') ?? 0) + 3)
    const after = (await scrape()).series
    const rejected = [...after].filter(([k]) => k.startsWith('rxtrace_readings_rejected_total{'))
    expect(rejected.reduce((sum, [, v]) => sum + v, 0)).toBe(2)
    expect(after.get('rxtrace_readings_rejected_total{code="invalid_json"}')).toBe(1)
    const evaluations = after.get('rxtrace_rule_evaluation_seconds_count') ?? 0
    expect(evaluations).toBeGreaterThan(before.get('rxtrace_rule_evaluation_seconds_count') ?? 0)
    expect(after.get('rxtrace_rule_evaluation_seconds_bucket{le="+Inf"}')).toBe(evaluations)
    expect(after.get('rxtrace_rule_evaluation_seconds_sum')).toBeGreaterThan(0)
  })

  it('counts HTTP requests by route template and status, never by the raw path', async () => {
    const pharmacy = await api.pharmacy(admin)
    const a = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const b = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const key = (status: number) => `rxtrace_http_requests_total{method="GET",route="/v1/deliveries/:id",status="${status}"}`
    const before = (await scrape()).series
    expect((await api.get(`/v1/deliveries/${a.delivery_id}`, admin)).status).toBe(200)
    expect((await api.get(`/v1/deliveries/${b.delivery_id}`, admin)).status).toBe(200)
    expect((await api.get('/v1/deliveries/dl_01jzzzzzzzzzzzzzzzzzzzzzzz', admin)).status).toBe(404)
    expect((await api.request('GET', '/v1/deliveries/dl_01jzzzzzzzzzzzzzzzzzzzzzzz')).status).toBe(401)
    expect((await api.request('GET', '/no/such/page/dl_01jzzzzzzzzzzzzzzzzzzzzzzz')).status).toBe(404)

    const { text, series } = await scrape()
    expect(series.get(key(200))).toBe((before.get(key(200)) ?? 0) + 2)
    expect(series.get(key(404))).toBe((before.get(key(404)) ?? 0) + 1)
    expect(series.get(key(401))).toBe((before.get(key(401)) ?? 0) + 1)
    expect(text).toMatch(/^rxtrace_http_request_duration_seconds_count\{method="GET",route="\/v1\/deliveries\/:id"\} \d+$/m)
    // No series carries an id: the label set stays bounded however many deliveries there are.
    for (const id of [a.delivery_id, b.delivery_id, 'dl_01jzzzzzzzzzzzzzzzzzzzzzzz', pharmacy.id]) expect(text).not.toContain(id)
    expect(text).not.toContain('/no/such/page')
  })
})
