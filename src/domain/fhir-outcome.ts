import { createHash } from 'node:crypto'
import type { Delivery } from './shapes.js'
import type { CustodyEvent } from './custody-event.js'

/**
 * A delivery's outcome as an HL7 FHIR R4 transaction Bundle (docs/interop.md, FHIR R4
 * writeback): a MedicationDispense per item, a Provenance per signed custody handoff, and for a
 * cold-chain delivery an Observation summarising its temperature trace. Pure: the same facts give
 * the same bytes, so every retry of a writeback sends the same Bundle.
 */

export type OutcomeFacts = {
  /** The `delivery.delivered` / `delivery.returned` event: the Bundle's identifier. */
  eventId: string
  at: string
  delivery: Delivery
  rx: { patient_id: string; items: { description: string; ndc?: string | undefined; quantity: number }[] }
  driver: { id: string; name: string } | null
  /** The service's public URL (ISSUER): rxtrace identifiers are namespaced under it. */
  baseUrl: string
}

type Resource = Record<string, unknown> & { resourceType: string }
type Reference = { reference?: string; identifier?: { system?: string; value: string }; display?: string }

/** FHIR R4 MedicationDispense.status (valueset medicationdispense-status) per outcome. */
export type DispenseStatus = 'completed' | 'stopped' | 'declined'

/** Where rxtrace's own extensions are defined (docs/interop.md). */
const EXTENSION_BASE = 'https://rxtrace.dev/fhir/StructureDefinition'
/** rxtrace's codes for the temperature summary and its components. */
const COLD_CHAIN_CODES = 'https://rxtrace.dev/fhir/CodeSystem/cold-chain'
const UCUM = 'http://unitsofmeasure.org'
const NDC = 'http://hl7.org/fhir/sid/ndc'
// ASTM E1762-95 signature types, the R4 Provenance.signature.type binding.
const SIGNATURE_TYPES = 'urn:iso-astm:E1762-95:2013'
const VERIFICATION_SIGNATURE = { system: SIGNATURE_TYPES, code: '1.2.840.10065.1.12.1.5', display: 'Verification Signature' }
const EVENT_WITNESS_SIGNATURE = { system: SIGNATURE_TYPES, code: '1.2.840.10065.1.12.1.9', display: 'Event Witness Signature' }
// FHIR `id` (R4 §2.24.0.1): what a Patient/<id> reference may carry.
const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/

/** DELIVERED → completed; RETURNED → stopped, or declined when the cold chain broke. */
function dispenseStatus(delivery: Pick<Delivery, 'status' | 'cold_chain'>): DispenseStatus {
  if (delivery.status === 'DELIVERED') return 'completed'
  return delivery.cold_chain.state === 'BROKEN' ? 'declined' : 'stopped'
}

export function outcomeBundle(facts: OutcomeFacts): Resource {
  const { delivery, rx, baseUrl } = facts
  const status = dispenseStatus(delivery)
  const urn = (role: string) => `urn:uuid:${nameUuid(`${facts.eventId}/${role}`)}`
  // The patient id is the pharmacy's own: a Patient/<id> reference when it is a FHIR id, always its identifier.
  const patient: Reference = {
    ...(FHIR_ID.test(rx.patient_id) ? { reference: `Patient/${rx.patient_id}` } : {}),
    identifier: { system: `${baseUrl}/v1/pharmacies/${delivery.pharmacy_id}/patients`, value: rx.patient_id },
  }
  const handedOver = [...delivery.custody].reverse().find((e) => e.type === 'delivered')
  const items = rx.items.length > 0 ? rx.items : [{ description: `Prescription ${delivery.rx_id}`, quantity: 1 }]

  const dispenses = items.map((item, index) => {
    const identifier = { system: `${baseUrl}/v1/deliveries`, value: items.length > 1 ? `${delivery.id}/${index + 1}` : delivery.id }
    const resource: Resource = {
      resourceType: 'MedicationDispense',
      identifier: [identifier],
      status,
      ...(status === 'completed' ? {} : { statusReasonCodeableConcept: { text: statusReason(delivery) } }),
      medicationCodeableConcept: {
        ...(item.ndc ? { coding: [{ system: NDC, code: item.ndc }] } : {}),
        text: item.description,
      },
      subject: patient,
      ...(facts.driver
        ? {
            performer: [{ actor: { identifier: { system: `${baseUrl}/v1/drivers`, value: facts.driver.id }, display: facts.driver.name } }],
          }
        : {}),
      authorizingPrescription: [{ identifier: { system: `${baseUrl}/v1/prescriptions`, value: delivery.rx_id } }],
      quantity: { value: item.quantity },
      // Handed over and received only when it reached the patient.
      ...(status === 'completed' && handedOver ? { whenHandedOver: handedOver.occurred_at, receiver: [patient] } : {}),
    }
    return {
      fullUrl: urn(`dispense/${index + 1}`),
      resource,
      // A retried transaction creates nothing twice (FHIR R4 §3.1.0.8.1, conditional create).
      request: { method: 'POST', url: 'MedicationDispense', ifNoneExist: `identifier=${identifier.system}|${identifier.value}` },
    }
  })
  const targets = dispenses.map((d) => ({ reference: d.fullUrl }))

  const provenances = delivery.custody
    .filter((event) => event.evidence_hash !== null)
    .map((event) => ({
      fullUrl: urn(`custody/${event.seq}`),
      resource: provenance(event, targets, baseUrl),
      request: { method: 'POST', url: 'Provenance' },
    }))

  const observation = delivery.cold_chain.required
    ? [{ fullUrl: urn('temperature'), resource: temperatureObservation(facts, targets), request: { method: 'POST', url: 'Observation' } }]
    : []

  return {
    resourceType: 'Bundle',
    identifier: { system: `${baseUrl}/v1/events`, value: facts.eventId },
    type: 'transaction',
    timestamp: facts.at,
    entry: [...dispenses, ...provenances, ...observation],
  }
}

function statusReason(delivery: Delivery): string {
  if (delivery.cold_chain.state === 'BROKEN')
    return `Returned to the pharmacy after a broken cold chain${delivery.cold_chain.break_reason ? ` (${delivery.cold_chain.break_reason})` : ''}`
  return 'Returned to the pharmacy undelivered'
}

/** A signed handoff: who signed (the party taking custody), when, the evidence hash, and the custody chain's hash. */
function provenance(event: CustodyEvent, targets: Reference[], baseUrl: string): Resource {
  const signer = party(event.to ?? event.actor.sub, baseUrl)
  return {
    resourceType: 'Provenance',
    extension: [
      { url: `${EXTENSION_BASE}/custody-hash`, valueString: event.hash },
      { url: `${EXTENSION_BASE}/custody-prev-hash`, valueString: event.prev_hash },
    ],
    target: targets,
    occurredDateTime: event.occurred_at,
    recorded: event.recorded_at,
    activity: { text: `custody ${event.type} (seq ${event.seq})` },
    agent: [{ who: signer }],
    signature: [
      {
        type: [event.type === 'delivered' ? VERIFICATION_SIGNATURE : EVENT_WITNESS_SIGNATURE],
        when: event.recorded_at,
        who: signer,
        // The custody chain keeps the signature as the SHA-256 of its evidence, never the evidence itself.
        sigFormat: 'text/plain',
        data: Buffer.from(event.evidence_hash!).toString('base64'),
      },
    ],
  }
}

/** A custody party: pharmacies, drivers and fleets by their rxtrace id; anyone else by the id given. */
function party(id: string, baseUrl: string): Reference {
  const collection = id.startsWith('ph_') ? 'pharmacies' : id.startsWith('dr_') ? 'drivers' : id.startsWith('fl_') ? 'fleets' : null
  return collection ? { identifier: { system: `${baseUrl}/v1/${collection}`, value: id } } : { identifier: { value: id } }
}

/** The trace's summary: min, max, mean kinetic temperature (USP <1079.2>) and time out of range. */
function temperatureObservation(facts: OutcomeFacts, targets: Reference[]): Resource {
  const { cold_chain: coldChain, custody } = facts.delivery
  const celsius = (code: string, text: string, value: number | null) => ({
    code: { coding: [{ system: COLD_CHAIN_CODES, code }], text },
    ...(value === null
      ? { dataAbsentReason: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/data-absent-reason', code: 'unknown' }] } }
      : { valueQuantity: { value, unit: '°C', system: UCUM, code: 'Cel' } }),
  })
  const broken = coldChain.state === 'BROKEN'
  const excursion = broken || coldChain.state === 'EXCURSION' || coldChain.time_out_of_range_s > 0
  return {
    resourceType: 'Observation',
    status: 'final',
    code: { coding: [{ system: COLD_CHAIN_CODES, code: 'temperature-trace' }], text: 'Temperature during delivery' },
    focus: targets,
    effectivePeriod: { start: custody[0]?.occurred_at ?? facts.delivery.created_at, end: facts.at },
    ...(facts.delivery.tote_id ? { device: { identifier: { system: `${facts.baseUrl}/v1/totes`, value: facts.delivery.tote_id } } } : {}),
    interpretation: [
      {
        // HL7 v3 ObservationInterpretation: N normal, A abnormal.
        coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation', code: excursion ? 'A' : 'N' }],
        text: broken
          ? `Cold chain broken (${coldChain.break_reason ?? 'unknown reason'})`
          : excursion
            ? 'Out of range for a time'
            : 'Within range',
      },
    ],
    component: [
      celsius('min', 'Minimum temperature', coldChain.min_c),
      celsius('max', 'Maximum temperature', coldChain.max_c),
      celsius('mkt', 'Mean kinetic temperature (USP <1079.2>)', coldChain.mkt_c),
      {
        code: { coding: [{ system: COLD_CHAIN_CODES, code: 'time-out-of-range' }], text: 'Time out of range' },
        valueQuantity: { value: coldChain.time_out_of_range_s, unit: 's', system: UCUM, code: 's' },
      },
    ],
  }
}

/** A name-based UUID (RFC 9562 §5.8 layout, SHA-256 bits): the same name, the same urn on every retry. */
function nameUuid(name: string): string {
  const hex = createHash('sha256').update(name).digest('hex')
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}
