import { expect, it } from 'vitest'
import type { RuleEvent } from '../../rules/index.js'
import type { Track } from '../../src/telemetry/cold-chain/delivery-states.js'
import { PendingEvents } from '../../src/telemetry/cold-chain/event-emission.js'

const track = {
  binding: { deliveryId: 'A', rxId: 'rx_A', pharmacyId: 'ph_1', fleetId: null },
  toteId: 't_A',
  dirty: false,
} as unknown as Track
const offline = (i: number) => ({ type: 'sensor.offline', key: `offline:${i}`, at: i, data: { last_seen_at: 'x' } }) as unknown as RuleEvent

it('puts back a long outage backlog whole and in order, ahead of what came since', () => {
  const pending = new PendingEvents()
  // More events than a function call takes as arguments (unshift(...events) threw RangeError).
  pending.add(
    track,
    Array.from({ length: 200_000 }, (_, i) => offline(i)),
  )
  const taken = pending.take()
  pending.add(track, [offline(200_000)])
  pending.putBack(taken)
  const again = pending.take()
  expect(again.events).toHaveLength(200_001)
  expect(again.events[0]!.dedupe_key).toBe('offline:0')
  expect(again.events[199_999]!.dedupe_key).toBe('offline:199999')
  expect(again.events[200_000]!.dedupe_key).toBe('offline:200000')
})
