import fc from 'fast-check'
import { beforeAll, describe, expect, it } from 'vitest'
import type { ValidateFunction } from 'ajv'
import { outcomeBundle, type OutcomeFacts } from '../../src/domain/fhir-outcome.js'
import type { Delivery } from '../../src/domain/shapes.js'
import { fhirR4Validator, firstErrors } from '../interop/fhir-schema.js'

// The pure Bundle builder over arbitrary outcomes: every Bundle is FHIR R4 as HL7's schema says,
// the dispense status follows the outcome, each signed handoff has its Provenance, and the same
// facts always give the same bytes (a retry sends what the first attempt sent).

const iso = fc.date({ min: new Date('2025-01-01'), max: new Date('2030-01-01'), noInvalidDate: true }).map((d) => d.toISOString())
const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/)
const custodyEvent = fc.record({
  type: fc.constantFrom('created', 'dispatched', 'picked_up', 'handoff', 'delivered', 'returned'),
  to: fc.option(fc.constantFrom('ph_01a', 'dr_01b', 'patient', 'fl_01c'), { nil: null }),
  evidence_hash: fc.option(
    hex64.map((h) => `sha256:${h}`),
    { nil: null },
  ),
  occurred_at: iso,
  hash: hex64,
})
const figure = fc.option(fc.double({ min: -40, max: 60, noNaN: true }), { nil: null })
const facts = fc.record({
  status: fc.constantFrom('DELIVERED', 'RETURNED'),
  required: fc.boolean(),
  state: fc.constantFrom('OK', 'EXCURSION', 'BROKEN'),
  min_c: figure,
  max_c: figure,
  mkt_c: figure,
  time_out_of_range_s: fc.nat({ max: 86_400 }),
  custody: fc.array(custodyEvent, { maxLength: 8 }),
  items: fc.array(
    fc.record({
      description: fc.string({ minLength: 1, maxLength: 40 }).filter((s) => s.trim().length > 0),
      ndc: fc.option(fc.constantFrom('0002-8215-01', '0088-2220-33'), { nil: undefined }),
      quantity: fc.integer({ min: 1, max: 100 }),
    }),
    { maxLength: 3 },
  ),
  patient_id: fc.constantFrom('pt_123', 'patient-4711', 'MRN 0042'),
  driver: fc.option(fc.record({ id: fc.constant('dr_01b'), name: fc.constant('Dana Driver') }), { nil: null }),
  at: iso,
})

type Facts = typeof facts extends fc.Arbitrary<infer T> ? T : never

function outcomeOf(f: Facts): OutcomeFacts {
  const custody = f.custody.map((e, i) => ({
    seq: i + 1,
    type: e.type,
    actor: { client_id: 'cl_x', sub: 'cl_x' },
    from: null,
    to: e.to,
    location: null,
    evidence_hash: e.evidence_hash,
    occurred_at: e.occurred_at,
    recorded_at: e.occurred_at,
    prev_hash: i === 0 ? 'sha256:audit' : `sha256:${f.custody[i - 1]!.hash}`,
    hash: `sha256:${e.hash}`,
  }))
  const delivery = {
    id: 'dl_01x',
    rx_id: 'rx_01x',
    pharmacy_id: 'ph_01a',
    status: f.status,
    tote_id: f.required ? 'tt_01t' : null,
    cold_chain: {
      required: f.required,
      state: f.required ? f.state : 'UNMONITORED',
      min_c: f.min_c,
      max_c: f.max_c,
      mkt_c: f.mkt_c,
      time_out_of_range_s: f.time_out_of_range_s,
      break_reason: f.state === 'BROKEN' ? 'hard_limit' : null,
    },
    custody,
    created_at: '2025-01-01T00:00:00.000Z',
  } as unknown as Delivery
  return {
    eventId: 'evt_01x',
    at: f.at,
    delivery,
    rx: { patient_id: f.patient_id, items: f.items },
    driver: f.driver,
    baseUrl: 'https://rxtrace.example',
  }
}

describe('the FHIR outcome Bundle (property)', () => {
  let validate: ValidateFunction
  beforeAll(() => {
    validate = fhirR4Validator()
  })

  it('is valid FHIR R4, says how the delivery ended, and proves each signed handoff', () => {
    fc.assert(
      fc.property(facts, (f) => {
        const outcome = outcomeOf(f)
        const bundle = outcomeBundle(outcome) as unknown as { entry: { resource: Record<string, any> }[] }
        expect(validate(bundle), firstErrors(validate)).toBe(true)
        const of = (type: string) => bundle.entry.map((e) => e.resource).filter((r) => r.resourceType === type)
        const expected = f.status === 'DELIVERED' ? 'completed' : f.required && f.state === 'BROKEN' ? 'declined' : 'stopped'
        const dispenses = of('MedicationDispense')
        expect(dispenses).toHaveLength(Math.max(1, f.items.length))
        for (const d of dispenses) expect(d.status).toBe(expected)
        const signed = outcome.delivery.custody.filter((e) => e.evidence_hash !== null)
        expect(of('Provenance').map((p) => p.extension[0].valueString)).toEqual(signed.map((e) => e.hash))
        expect(of('Observation')).toHaveLength(f.required ? 1 : 0)
        expect(JSON.stringify(outcomeBundle(outcomeOf(f)))).toBe(JSON.stringify(bundle))
      }),
      { numRuns: 200 },
    )
  })
})
