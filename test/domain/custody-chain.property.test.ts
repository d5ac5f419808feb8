import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { chainEvent, verifyChain, type CustodyEvent, type CustodyType } from '../../src/domain/custody.js'

const AUDIT_HASH = 'sha256:' + 'a'.repeat(64)
const custodyTypes: CustodyType[] = [
  'created',
  'dispatched',
  'picked_up',
  'handoff',
  'delivered',
  'failed',
  'returned',
  'cancelled',
  'disposition',
]
const fields = [
  'seq',
  'type',
  'actor',
  'from',
  'to',
  'location',
  'evidence_hash',
  'occurred_at',
  'recorded_at',
  'prev_hash',
  'hash',
] as const

const time = fc.integer({ min: Date.UTC(2024, 0, 1), max: Date.UTC(2030, 0, 1) }).map((ms) => new Date(ms).toISOString())
const party = fc.option(fc.stringMatching(/^(us|dr|ph)_[0-9a-z]{1,8}$/), { nil: null })
const location = fc.option(
  fc.record({ lat: fc.double({ min: -90, max: 90, noNaN: true }), lng: fc.double({ min: -180, max: 180, noNaN: true }) }),
  { nil: null },
)

/** The members of one event, as an action would write them; chainEvent adds seq, prev_hash and hash. */
const eventBody = fc.record({
  type: fc.constantFrom(...custodyTypes),
  actor: fc.record({ client_id: fc.string({ minLength: 1, maxLength: 12 }), sub: fc.string({ minLength: 1, maxLength: 12 }) }),
  from: party,
  to: party,
  location,
  evidence_hash: fc.option(
    fc.stringMatching(/^[0-9a-f]{64}$/).map((h) => `sha256:${h}`),
    { nil: null },
  ),
  occurred_at: time,
  recorded_at: time,
})

function buildChain(bodies: readonly Omit<CustodyEvent, 'seq' | 'prev_hash' | 'hash'>[]): CustodyEvent[] {
  const chain: CustodyEvent[] = []
  for (const body of bodies) {
    chain.push(chainEvent(chain.at(-1)?.hash ?? AUDIT_HASH, { seq: chain.length + 1, ...body }))
  }
  return chain
}

/** Any JSON value a row could be edited to: numbers, strings, null, objects. */
const anyValue = fc.oneof(
  fc.integer({ min: -3, max: 1_000 }),
  fc.string({ maxLength: 20 }),
  fc.constant(null),
  fc.constantFrom(...custodyTypes),
  fc.record({ client_id: fc.string(), sub: fc.string() }),
  location,
  time,
)

describe('the custody chain', () => {
  it('verifies as built', () => {
    fc.assert(
      fc.property(fc.array(eventBody, { minLength: 1, maxLength: 8 }), (bodies) => {
        const chain = buildChain(bodies)
        expect(verifyChain(AUDIT_HASH, chain)).toEqual({ valid: true, length: chain.length, head: chain.at(-1)!.hash })
      }),
    )
  })

  it('finds a change to any member of any event at that event', () => {
    const tampered = fc.array(eventBody, { minLength: 1, maxLength: 8 }).chain((bodies) =>
      fc.record({
        bodies: fc.constant(bodies),
        index: fc.nat({ max: bodies.length - 1 }),
        field: fc.constantFrom(...fields),
        value: anyValue,
      }),
    )
    fc.assert(
      fc.property(tampered, ({ bodies, index, field, value }) => {
        const chain = buildChain(bodies)
        const original = chain[index]!
        fc.pre(JSON.stringify(original[field]) !== JSON.stringify(value))
        chain[index] = { ...original, [field]: value } as CustodyEvent
        expect(verifyChain(AUDIT_HASH, chain)).toMatchObject({ valid: false, length: chain.length, first_bad_seq: original.seq })
      }),
      { numRuns: 500 },
    )
  })

  it('finds a dropped or reordered event where the chain first breaks', () => {
    fc.assert(
      fc.property(
        fc
          .array(eventBody, { minLength: 2, maxLength: 8 })
          .chain((bodies) => fc.tuple(fc.constant(bodies), fc.nat({ max: bodies.length - 2 }))),
        ([bodies, index]) => {
          const chain = buildChain(bodies)
          const dropped = chain.filter((_, i) => i !== index)
          expect(verifyChain(AUDIT_HASH, dropped)).toMatchObject({ valid: false, first_bad_seq: index + 1 })
          const swapped = [...chain]
          ;[swapped[index], swapped[index + 1]] = [swapped[index + 1]!, swapped[index]!]
          expect(verifyChain(AUDIT_HASH, swapped)).toMatchObject({ valid: false, first_bad_seq: index + 1 })
        },
      ),
    )
  })

  it('does not verify against another prescription', () => {
    fc.assert(
      fc.property(fc.array(eventBody, { minLength: 1, maxLength: 4 }), (bodies) => {
        expect(verifyChain('sha256:' + 'b'.repeat(64), buildChain(bodies))).toMatchObject({ valid: false, first_bad_seq: 1 })
      }),
    )
  })
})
