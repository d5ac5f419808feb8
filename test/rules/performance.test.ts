// evaluate() sits on the ingest hot path; its speed is measured by `npm run bench:ingest`, not here
// (a timing assertion fails on a busy machine). This checks a long stream is evaluated whole.
import { expect, it } from 'vitest'
import { builtInProfiles, evaluate, initialColdChain, ReorderBuffer, type RuleEvent } from '../../rules/index.js'

it('evaluates half a million readings through the reorder window, every one counted, with events raised', () => {
  const profile = builtInProfiles.refrigerated
  const n = 500_000
  const start = Date.UTC(2025, 0, 6)
  // A tote swinging through and out of range every ~50 minutes, one reading a second.
  const readings = Array.from({ length: n }, (_, i) => ({ ts: start + i * 1000, temp_c: 5 + 4 * Math.sin(i / 500) }))
  const state = initialColdChain(profile, start)
  const buffer = new ReorderBuffer<{ ts: number; temp_c: number }>(30_000)
  const events: RuleEvent[] = []

  for (const r of readings) evaluate(state, profile, buffer.push(r, r.ts).released, events)
  evaluate(state, profile, buffer.flushAll(), events)

  expect(state.readings).toBe(n)
  expect(events.length).toBeGreaterThan(0)
})
