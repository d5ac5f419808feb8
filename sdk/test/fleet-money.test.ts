import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiError, createRxtraceClient } from '@rxtrace/sdk'
import { ADMIN, listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

describe('rate card and reconciliation helpers', () => {
  let api: TestApi
  let baseUrl: string
  beforeAll(async () => {
    ;({ api, baseUrl } = await listeningService())
  })
  afterAll(() => api?.stop())

  it('read the rate card, the reconciliation as JSON and CSV, and check a statement as lines or CSV', async () => {
    const rx = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin, { location: { lat: 39.7817, lng: -89.6501 } })
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    await expect(rx.rateCard(fleetId)).rejects.toMatchObject({ status: 404 })
    const { error } = await rx.api.PUT('/v1/fleets/{id}/rate-card', {
      params: { path: { id: fleetId } },
      body: {
        currency: 'USD',
        base_fee_cents: 650,
        per_km_cents: 85,
        cold_chain_surcharge_cents: 300,
        failed_attempt_fee_cents: 400,
        after_hours_multiplier: 1.5,
        commission_bps: 1200,
      },
    })
    expect(error).toBeUndefined()
    expect(await rx.rateCard(fleetId)).toMatchObject({ fleet_id: fleetId, version: 1, currency: 'USD', base_fee_cents: 650 })

    const delivery = (await api.prescription(admin, { pharmacy_id: pharmacy.id })).delivery_id
    expect((await api.post(`/v1/deliveries/${delivery}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })).status).toBe(200)
    expect(
      (await api.post(`/v1/deliveries/${delivery}/pickup`, admin, { from: pharmacy.id, to: driverId, signature: 'signed' })).status,
    ).toBe(200)
    const delivered = await api.post(`/v1/deliveries/${delivery}/deliver`, admin, {
      verification: { method: 'otp', evidence: '123456' },
      location: { lat: 39.8, lng: -89.64 },
    })
    expect(delivered.status, delivered.text).toBe(200)

    const period = { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString() }
    const recon = await rx.reconciliation(fleetId, period)
    expect(recon.currency).toBe('USD')
    expect(recon.lines.map((l) => l.delivery_id)).toEqual([delivery])
    const line = recon.lines[0]!
    expect(line).toMatchObject({ outcome: 'delivered', rate_card_version: 1, base_cents: 650 })
    expect(recon.totals).toMatchObject({ lines: 1, payout_cents: line.payout_cents })

    const csv = await rx.reconciliationCsv(fleetId, period)
    const [header, row, ...rest] = csv.trimEnd().split('\r\n')
    expect(header!.split(',')).toEqual(expect.arrayContaining(['delivery_id', 'payout_cents']))
    expect(row).toContain(delivery)
    expect(rest).toEqual([])

    // Our own CSV posted back matches every line; JSON lines with a wrong payout show the difference.
    expect(await rx.checkStatement(fleetId, period, csv)).toMatchObject({
      matched: 1,
      mismatched: [],
      missing_from_statement: [],
      unknown_in_statement: [],
    })
    const compared = await rx.checkStatement(fleetId, period, [
      { delivery_id: delivery, payout_cents: line.payout_cents + 10 },
      { delivery_id: 'dl_elsewhere', payout_cents: 5 },
    ])
    expect(compared.matched).toBe(0)
    expect(compared.mismatched).toEqual([
      { delivery_id: delivery, ours: line.payout_cents, theirs: line.payout_cents + 10, difference: 10 },
    ])
    expect(compared.unknown_in_statement).toEqual([{ delivery_id: 'dl_elsewhere', theirs: 5 }])

    const malformed = await rx.checkStatement(fleetId, period, 'delivery_id,payout_cents\r\ndl_x,not a number\r\n').catch((e: unknown) => e)
    expect(malformed).toBeInstanceOf(ApiError)
    expect(malformed).toMatchObject({ status: 422, problem: { code: 'validation_failed', errors: [{ pointer: '/lines/2' }] } })
  })
})
