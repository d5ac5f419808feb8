// evaluate() sits on the ingest hot path (~100k readings/s): per reading it must stay O(1).
import { expect, it } from 'vitest'
import { builtInProfiles, evaluate, initialColdChain, ReorderBuffer, type RuleEvent } from '../../rules/index.js'

it('evaluates half a million readings through the reorder window well within 2.5 s (≥ 200k/s on a slow CI core)', () => {
  const profile = builtInProfiles.refrigerated
  const n = 500_000
  const start = Date.UTC(2025, 0, 6)
  // A tote swinging through and out of range every ~50 minutes, one reading a second.
  const readings = Array.from({ length: n }, (_, i) => ({ ts: start + i * 1000, temp_c: 5 + 4 * Math.sin(i / 500) }))
  const state = initialColdChain(profile, start)
  const buffer = new ReorderBuffer<{ ts: number; temp_c: number }>(30_000)
  const events: RuleEvent[] = []

  const t0 = performance.now()
  for (const r of readings) evaluate(state, profile, buffer.push(r, r.ts).released, events)
  evaluate(state, profile, buffer.flushAll(), events)
  const elapsed = performance.now() - t0

  expect(state.readings).toBe(n)
  expect(events.length).toBeGreaterThan(0)
  expect(elapsed).toBeLessThan(2500)
})
