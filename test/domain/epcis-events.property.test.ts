import { createHash } from 'node:crypto'
import { fc, test } from '@fast-check/vitest'
import { describe, expect } from 'vitest'
import type { CustodyEvent, CustodyType } from '../../src/domain/custody.js'
import { objectEvents, sensorIntervals, type EpcisDelivery } from '../../src/domain/epcis.js'

/** Any custody chain: a dispatch, then handoffs and other events at non-decreasing times. */
const chains = fc
  .array(
    fc.record({
      type: fc.constantFrom<CustodyType>('picked_up', 'handoff', 'failed', 'disposition', 'delivered', 'returned'),
      gap: fc.nat(3_600_000),
    }),
    {
      maxLength: 12,
    },
  )
  .map((steps) => {
    let at = Date.parse('2026-11-28T12:00:00Z')
    const event = (seq: number, type: CustodyType): CustodyEvent => ({
      seq,
      type,
      actor: { client_id: 'cl_1', sub: 'cl_1' },
      from: null,
      to: null,
      location: null,
      evidence_hash: null,
      occurred_at: new Date(at).toISOString(),
      recorded_at: new Date(at).toISOString(),
      prev_hash: 'sha256:' + '0'.repeat(64),
      hash: `sha256:${createHash('sha256').update(String(seq)).digest('hex')}`,
    })
    const custody = [event(1, 'created'), event(2, 'dispatched')]
    steps.forEach((s, i) => {
      at += s.gap
      custody.push(event(i + 3, s.type))
    })
    return custody
  })

const deliveryOf = (custody: CustodyEvent[]): EpcisDelivery => ({
  id: 'dl_1',
  tote_id: 'tt_1',
  created_at: custody[0]!.occurred_at,
  custody,
  cold_chain: { required: true, excursions: [], disposition: null },
})
const HANDOFFS = new Set(['picked_up', 'handoff', 'delivered', 'returned'])

describe('EPCIS events of a custody chain', () => {
  test.prop([chains])('one event per handoff, in chain order, each keeping its custody hash', (custody) => {
    const events = objectEvents({
      delivery: deliveryOf(custody),
      items: [],
      pharmacy: { id: 'ph_1', gln: null, timezone: 'UTC' },
      baseUrl: 'https://rx.example',
      readings: new Map(),
    })
    const handoffs = custody.filter((e) => HANDOFFS.has(e.type))
    expect(events.map((e) => e['rxtrace:custodyHash'])).toEqual(handoffs.map((e) => e.hash))
    expect(new Set(events.map((e) => e.eventID)).size).toBe(events.length)
    for (const e of events) expect(e.eventID).toMatch(/^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  })

  test.prop([chains])('sensor intervals tile the time from the dispatch to the last handoff, with no gap or overlap', (custody) => {
    const intervals = sensorIntervals(deliveryOf(custody))
    const handoffs = custody.filter((e) => HANDOFFS.has(e.type))
    expect(intervals.map((i) => i.seq)).toEqual(handoffs.map((e) => e.seq))
    let from = Date.parse(custody[1]!.occurred_at)
    for (const interval of intervals) {
      expect(interval.fromMs).toBe(from)
      expect(interval.toMs).toBeGreaterThanOrEqual(interval.fromMs)
      from = interval.toMs
    }
  })
})
