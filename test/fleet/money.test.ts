import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock, MINUTE } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'

/**
 * A fleet's money, as an operator sees it: rate card versions, each delivery priced by the
 * version in force at its dispatch, the period's reconciliation (JSON and CSV) and the check of
 * the operator's own statement. Runs on SQLite and, when it answers, PostgreSQL.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

// 19:30 in Springfield, IL (UTC−6 in November): business hours, half an hour before they end.
const START = Date.parse('2026-11-11T01:30:00.000Z')
const CARD = {
  currency: 'USD',
  base_fee_cents: 650,
  per_km_cents: 85,
  cold_chain_surcharge_cents: 300,
  failed_attempt_fee_cents: 400,
  after_hours_multiplier: 1.5,
  commission_bps: 1200,
}
const SPRINGFIELD = { lat: 39.7817, lng: -89.6501 }
const PATIENT = { lat: 39.8017, lng: -89.6436 } // ≈ 2.29 km north

function describeMoney(store: StoreUnderTest) {
  describe(`fleet money on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let pharmacyId: string
    let pharmacyToken: string
    let fleet: { fleetId: string; driverId: string }
    let fleetToken: string
    let otherFleetToken: string
    const clock = testClock(START)

    async function restricted(scope: string, tenant: Record<string, string>): Promise<string> {
      const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
      expect(res.status, res.text).toBe(201)
      return api.tokenFor(res.body.client_id, res.body.client_secret)
    }

    /** A delivery carried by the fleet and ended by `end`; minutes pass between the steps. */
    async function carried(
      carrier: { fleetId: string; driverId: string },
      end: 'deliver' | 'fail',
      opts: { cold_chain?: boolean; endLocation?: { lat: number; lng: number } } = {},
    ) {
      const rx = await api.prescription(admin, {
        pharmacy_id: pharmacyId,
        cold_chain: false,
        ...(opts.cold_chain ? { cold_chain: true } : {}),
      })
      const tote = opts.cold_chain ? (await api.tote(admin, { pharmacy_id: pharmacyId })).id : undefined
      const id = rx.delivery_id
      const step = async (action: string, body: Record<string, unknown>) => {
        clock.advance(MINUTE)
        const res = await api.post(`/v1/deliveries/${id}/${action}`, admin, body)
        expect(res.status, res.text).toBe(200)
      }
      await step('dispatch', { fleet_id: carrier.fleetId, driver_id: carrier.driverId, ...(tote ? { tote_id: tote } : {}) })
      await step('pickup', { from: pharmacyId, to: carrier.driverId, signature: 'data:image/png;base64,AAAA' })
      if (end === 'deliver')
        await step('deliver', {
          verification: { method: 'otp', evidence: '482913' },
          ...(opts.endLocation ? { location: opts.endLocation } : {}),
        })
      else await step('fail', { reason: 'patient_unavailable', note: 'nobody home' })
      return id
    }

    beforeAll(async () => {
      api = await store.start({ TOKEN_TTL_S: '86400' }, { clock })
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin, { location: SPRINGFIELD })).id
      fleet = await api.fleetWithDriver(admin)
      const otherFleet = await api.fleetWithDriver(admin)
      pharmacyToken = await restricted('fleet:read fleet:write deliveries:write', { pharmacy_id: pharmacyId })
      fleetToken = await restricted('fleet:read fleet:write deliveries:read', { fleet_id: fleet.fleetId })
      otherFleetToken = await restricted('fleet:read fleet:write', { fleet_id: otherFleet.fleetId })
    })
    afterAll(async () => {
      await api?.stop()
      await store.cleanup()
    })

    describe('rate cards', () => {
      it('has no rate card in force before the first version', async () => {
        const res = await api.get(`/v1/fleets/${fleet.fleetId}/rate-card`, fleetToken)
        expect(res.status).toBe(404)
      })

      it('adds versions, never edits one, and answers the version in force', async () => {
        const first = await api.request('PUT', `/v1/fleets/${fleet.fleetId}/rate-card`, { token: admin, body: CARD })
        expect(first.status, first.text).toBe(201)
        expect(first.body).toMatchObject({ version: 1, ...CARD, fleet_id: fleet.fleetId })
        const current = await api.get(`/v1/fleets/${fleet.fleetId}/rate-card`, fleetToken)
        expect(current.body).toMatchObject({ version: 1, base_fee_cents: 650 })
        // A version scheduled for later is listed but not yet in force.
        const later = await api.request('PUT', `/v1/fleets/${fleet.fleetId}/rate-card`, {
          token: admin,
          body: { ...CARD, base_fee_cents: 9_999, effective_from: new Date(START + 24 * 60 * MINUTE).toISOString() },
        })
        expect(later.body.version).toBe(2)
        expect((await api.get(`/v1/fleets/${fleet.fleetId}/rate-card`, fleetToken)).body.version).toBe(1)
        const versions = await api.get(`/v1/fleets/${fleet.fleetId}/rate-card/versions?limit=1`, fleetToken)
        expect(versions.body.data.map((v: { version: number }) => v.version)).toEqual([1])
        const next = await api.get(`/v1/fleets/${fleet.fleetId}/rate-card/versions?limit=1&cursor=${versions.body.next_cursor}`, fleetToken)
        expect(next.body.data.map((v: { version: number }) => v.version)).toEqual([2])
      })

      it('gives concurrent PUTs one version each', async () => {
        const { fleetId } = await api.fleetWithDriver(admin)
        const puts = await Promise.all(
          [1, 2, 3, 4].map((n) =>
            api.request('PUT', `/v1/fleets/${fleetId}/rate-card`, { token: admin, body: { ...CARD, base_fee_cents: 100 * n } }),
          ),
        )
        expect(puts.map((p) => p.status)).toEqual([201, 201, 201, 201])
        expect(puts.map((p) => p.body.version).sort()).toEqual([1, 2, 3, 4])
        const versions = await api.get(`/v1/fleets/${fleetId}/rate-card/versions`, admin)
        expect(versions.body.data.map((v: { base_fee_cents: number }) => v.base_fee_cents).sort()).toEqual([100, 200, 300, 400])
      })

      it('refuses another currency, a past effective_from and bad amounts', async () => {
        const path = `/v1/fleets/${fleet.fleetId}/rate-card`
        const euro = await api.request('PUT', path, { token: admin, body: { ...CARD, currency: 'EUR' } })
        expect(euro.status).toBe(422)
        expect(euro.body.errors).toEqual([{ pointer: '/currency', message: "must stay USD, the currency of this fleet's rate cards" }])
        const past = await api.request('PUT', path, { token: admin, body: { ...CARD, effective_from: '2020-01-01T00:00:00Z' } })
        expect(past.body.errors?.[0]?.pointer).toBe('/effective_from')
        const bad = await api.request('PUT', path, {
          token: admin,
          body: { ...CARD, base_fee_cents: 1.5, after_hours_multiplier: 1.23456 },
        })
        expect(bad.status).toBe(422)
        expect(bad.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/after_hours_multiplier', '/base_fee_cents'])
      })
    })

    describe('walls', () => {
      it('lets a pharmacy dispatch to the fleet but never change its rate card or see its money', async () => {
        const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
        const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, pharmacyToken, { fleet_id: fleet.fleetId })
        expect(dispatched.status, dispatched.text).toBe(200)
        const f = fleet.fleetId
        expect((await api.request('PUT', `/v1/fleets/${f}/rate-card`, { token: pharmacyToken, body: CARD })).status).toBe(403)
        expect((await api.request('PATCH', `/v1/fleets/${f}`, { token: pharmacyToken, body: { name: 'Mine now' } })).status).toBe(403)
        for (const path of [
          `/v1/fleets/${f}/rate-card`,
          `/v1/fleets/${f}/rate-card/versions`,
          `/v1/fleets/${f}/reconciliation?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z`,
          `/v1/fleets/${f}/dashboard`,
        ]) {
          expect((await api.get(path, pharmacyToken)).status, path).toBe(403)
        }
        expect((await api.post(`/v1/fleets/${f}/embed-sessions`, pharmacyToken, { ttl_s: 60 })).status).toBe(403)
        const statement = await api.request('POST', `/v1/fleets/${f}/reconciliation?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z`, {
          token: pharmacyToken,
          raw: '',
          headers: { 'content-type': 'text/csv' },
        })
        expect(statement.status).toBe(403)
      })

      it("answers 404 to another fleet's token for everything", async () => {
        const f = fleet.fleetId
        const period = 'from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z'
        for (const path of [
          `/v1/fleets/${f}/rate-card`,
          `/v1/fleets/${f}/rate-card/versions`,
          `/v1/fleets/${f}/reconciliation?${period}`,
          `/v1/fleets/${f}/dashboard`,
        ]) {
          expect((await api.get(path, otherFleetToken)).status, path).toBe(404)
        }
        expect((await api.request('PUT', `/v1/fleets/${f}/rate-card`, { token: otherFleetToken, body: CARD })).status).toBe(404)
        expect((await api.request('PATCH', `/v1/fleets/${f}`, { token: otherFleetToken, body: { name: 'x' } })).status).toBe(404)
        expect((await api.post(`/v1/fleets/${f}/embed-sessions`, otherFleetToken, { ttl_s: 60 })).status).toBe(404)
        const statement = await api.request('POST', `/v1/fleets/${f}/reconciliation?${period}`, {
          token: otherFleetToken,
          raw: 'delivery_id,payout_cents\r\n',
          headers: { 'content-type': 'text/csv' },
        })
        expect(statement.status).toBe(404)
      })

      it('lets only an unrestricted client set the rate card, not the fleet itself', async () => {
        const res = await api.request('PUT', `/v1/fleets/${fleet.fleetId}/rate-card`, { token: fleetToken, body: CARD })
        expect(res.status).toBe(403)
      })
    })

    describe('reconciliation', () => {
      let delivered: string
      let afterHours: string
      let failed: string
      let coldChain: string
      let from: string
      let to: string
      let money: { fleetId: string; driverId: string }
      let moneyToken: string

      beforeAll(async () => {
        money = await api.fleetWithDriver(admin)
        moneyToken = await restricted('fleet:read', { fleet_id: money.fleetId })
        const card = await api.request('PUT', `/v1/fleets/${money.fleetId}/rate-card`, { token: admin, body: CARD })
        expect(card.status, card.text).toBe(201)
        clock.advance(MINUTE)
        from = new Date(clock.now()).toISOString()
        delivered = await carried(money, 'deliver', { endLocation: PATIENT })
        failed = await carried(money, 'fail')
        coldChain = await carried(money, 'deliver', { cold_chain: true })
        // Past 20:00 local: after hours.
        clock.set(Date.parse('2026-11-11T02:05:00.000Z'))
        afterHours = await carried(money, 'deliver', { endLocation: PATIENT })
        clock.advance(MINUTE)
        to = new Date(clock.now()).toISOString()
      })

      it('prices each ended delivery by its rate card version, rounding each line half to even', async () => {
        const res = await api.get(`/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, moneyToken)
        expect(res.status, res.text).toBe(200)
        const byId = Object.fromEntries(res.body.lines.map((l: { delivery_id: string }) => [l.delivery_id, l]))
        expect(Object.keys(byId).sort()).toEqual([delivered, failed, coldChain, afterHours].sort())
        // 2.292 km × 85 = 194.82 → 195; 845 gross; 12 % = 101.4 → 101.
        expect(byId[delivered]).toMatchObject({
          outcome: 'delivered',
          rate_card_version: 1,
          after_hours: false,
          distance_km: 2.292,
          base_cents: 650,
          distance_cents: 195,
          cold_chain_cents: 0,
          failed_attempt_cents: 0,
          after_hours_cents: 0,
          gross_cents: 845,
          commission_cents: 101,
          payout_cents: 744,
        })
        expect(byId[failed]).toMatchObject({
          outcome: 'failed',
          base_cents: 0,
          failed_attempt_cents: 400,
          gross_cents: 400,
          commission_cents: 48,
          payout_cents: 352,
        })
        // No end location: 0 km charged; the surcharge for a cold chain.
        expect(byId[coldChain]).toMatchObject({
          distance_km: null,
          distance_cents: 0,
          cold_chain_cents: 300,
          gross_cents: 950,
          commission_cents: 114,
          payout_cents: 836,
        })
        // ×1.5 of 845 adds 422.5 → 422 (half to even, not up); 1267 gross; 12 % = 152.04 → 152.
        expect(byId[afterHours]).toMatchObject({
          after_hours: true,
          distance_cents: 195,
          after_hours_cents: 422,
          gross_cents: 1267,
          commission_cents: 152,
          payout_cents: 1115,
        })
        for (const name of ['gross_cents', 'commission_cents', 'payout_cents', 'base_cents', 'distance_cents']) {
          expect(res.body.totals[name]).toBe(res.body.lines.reduce((sum: number, l: Record<string, number>) => sum + l[name]!, 0))
        }
        expect(res.body.totals.lines).toBe(4)
        expect(res.body.currency).toBe('USD')
      })

      it('keeps the version recorded at dispatch when a later version comes into force', async () => {
        const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
        clock.advance(MINUTE)
        await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: money.fleetId, driver_id: money.driverId })
        const put = await api.request('PUT', `/v1/fleets/${money.fleetId}/rate-card`, {
          token: admin,
          body: { ...CARD, base_fee_cents: 700 },
        })
        expect(put.status, put.text).toBe(201)
        clock.advance(MINUTE)
        await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: pharmacyId, to: money.driverId, signature: 'sig' })
        clock.advance(MINUTE)
        await api.post(`/v1/deliveries/${rx.delivery_id}/deliver`, admin, { verification: { method: 'otp', evidence: '1' } })
        clock.advance(MINUTE)
        const res = await api.get(
          `/v1/fleets/${money.fleetId}/reconciliation?from=${to}&to=${new Date(clock.now()).toISOString()}`,
          moneyToken,
        )
        expect(res.body.lines).toHaveLength(1)
        expect(res.body.lines[0]).toMatchObject({ delivery_id: rx.delivery_id, rate_card_version: 1, base_cents: 650 })
      })

      it('gives the same lines as CSV', async () => {
        const json = await api.get(`/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, moneyToken)
        const csv = await api.request('GET', `/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, {
          token: moneyToken,
          headers: { accept: 'text/csv' },
        })
        expect(csv.headers.get('content-type')).toMatch(/^text\/csv/)
        const [header, ...rows] = csv.text.trimEnd().split('\r\n')
        expect(header!.split(',')).toContain('payout_cents')
        expect(rows).toHaveLength(4)
        const payout = header!.split(',').indexOf('payout_cents')
        expect(rows.map((r) => Number(r.split(',')[payout])).reduce((a, b) => a + b, 0)).toBe(json.body.totals.payout_cents)
      })

      it('refuses a period that ends before it starts', async () => {
        const res = await api.get(`/v1/fleets/${money.fleetId}/reconciliation?from=${to}&to=${from}`, moneyToken)
        expect(res.status).toBe(422)
        expect(res.body.errors[0].pointer).toBe('/query/to')
      })

      it('checks a JSON-lines statement: matched, mismatched, missing and unknown', async () => {
        const ours = (await api.get(`/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, moneyToken)).body
        const payout = (id: string) => ours.lines.find((l: { delivery_id: string }) => l.delivery_id === id).payout_cents as number
        const statement =
          [
            { delivery_id: delivered, payout_cents: payout(delivered) },
            { delivery_id: failed, payout_cents: payout(failed) + 25 },
            { delivery_id: coldChain, payout_cents: payout(coldChain) },
            { delivery_id: 'dl_not_ours', payout_cents: 100 },
          ]
            .map((l) => JSON.stringify(l))
            .join('\n') + '\n'
        const res = await api.request('POST', `/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, {
          token: moneyToken,
          raw: statement,
          headers: { 'content-type': 'application/x-ndjson' },
        })
        expect(res.status, res.text).toBe(200)
        expect(res.body).toMatchObject({
          matched: 2,
          mismatched: [{ delivery_id: failed, ours: payout(failed), theirs: payout(failed) + 25, difference: 25 }],
          missing_from_statement: [{ delivery_id: afterHours, ours: payout(afterHours) }],
          unknown_in_statement: [{ delivery_id: 'dl_not_ours', theirs: 100 }],
        })
        expect(res.body.totals.difference).toBe(25 + 100 - payout(afterHours))
      })

      it('accepts our own CSV back as a statement, every line matched', async () => {
        const csv = await api.request('GET', `/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, {
          token: moneyToken,
          headers: { accept: 'text/csv' },
        })
        const res = await api.request('POST', `/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, {
          token: moneyToken,
          raw: csv.text,
          headers: { 'content-type': 'text/csv' },
        })
        expect(res.status, res.text).toBe(200)
        expect(res.body).toMatchObject({ matched: 4, mismatched: [], missing_from_statement: [], unknown_in_statement: [] })
      })

      it('names every malformed line of a statement with 422', async () => {
        const statement = [
          JSON.stringify({ delivery_id: delivered, payout_cents: 1 }),
          '{not json',
          JSON.stringify({ delivery_id: failed, payout_cents: 1.5 }),
          '',
          JSON.stringify({ delivery_id: delivered, payout_cents: 2 }),
          '[1,2]',
        ].join('\n')
        const res = await api.request('POST', `/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, {
          token: moneyToken,
          raw: statement,
          headers: { 'content-type': 'application/x-ndjson' },
        })
        expect(res.status).toBe(422)
        expect(res.body.code).toBe('validation_failed')
        expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/lines/2', '/lines/3', '/lines/5', '/lines/6'])
        const csv = await api.request('POST', `/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`, {
          token: moneyToken,
          raw: 'id,amount\r\nx,1\r\n',
          headers: { 'content-type': 'text/csv' },
        })
        expect(csv.status).toBe(422)
        expect(csv.body.errors[0].pointer).toBe('/lines/1')
      })

      it('refuses a statement in another media type, and one over 4 MiB', async () => {
        const path = `/v1/fleets/${money.fleetId}/reconciliation?from=${from}&to=${to}`
        const xml = await api.request('POST', path, {
          token: moneyToken,
          raw: '<statement/>',
          headers: { 'content-type': 'application/xml' },
        })
        expect(xml.status).toBe(415)
        const line = `${JSON.stringify({ delivery_id: delivered, payout_cents: 1 })}\n`
        const huge = line.repeat(Math.ceil((4 * 1024 * 1024 + 1) / line.length))
        const big = await api.request('POST', path, { token: moneyToken, raw: huge, headers: { 'content-type': 'application/x-ndjson' } })
        expect(big.status).toBe(413)
      })
    })
  })
}

describeMoney(sqliteStore)
if (url) describeMoney(postgresStore(url))
