import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import type { Disposition } from '../domain/cold-chain.js'
import type { CustodyEvent } from '../domain/custody.js'
import { decideHandover } from '../domain/custody-rules.js'
import { validationFailed } from '../errors.js'
import { jcsHash, sha256Hex } from '../hashing.js'
import { fromJson, toJson, type Database, type Executor } from '../store/schema.js'
import type { ActionInput } from './delivery-shapes.js'
import { checkDispatch, checkDriver } from './dispatch-checks.js'
import { checkUserParties } from './user-parties.js'
import type { SensorWarning } from '../domain/sensor-calibration.js'
import type { DeliveryEvidence } from '../domain/custody-event.js'
import type { PodRequirements } from '../domain/proof-of-delivery.js'
import type { DeliveryPins } from './delivery-pin.js'
import { checkedEvidence, requirementsAtDispatch } from './delivery-proof.js'

// Drivers' phones and our clock disagree a little; an occurred_at this far ahead is still "now".
const CLOCK_SKEW_MS = 5_000

/** The parties and evidence of the custody event an action appends. */
export type ActionParties = {
  from: string | null
  to: string | null
  evidence_hash: string | null
  /** `deliver` with proofs: what enters the custody event (docs/api.md, Proof of delivery). */
  evidence?: DeliveryEvidence | null
  /** `dispatch` or `reattempt` of a delivery whose requirements name a PIN: one is issued in its transaction. */
  issuePin?: boolean
}

/**
 * Validates who hands the goods to whom (the pure rules of domain/custody-rules.ts, then what
 * needs the store), and adds to `changes` what each action changes besides the status.
 */
export async function actionParties(
  db: Executor,
  pins: DeliveryPins,
  principal: Principal,
  delivery: Database['deliveries'],
  chain: CustodyEvent[],
  input: ActionInput,
  occurredAt: string,
  changes: Partial<Database['deliveries']>,
): Promise<ActionParties> {
  const handover = decideHandover(delivery, chain, input)
  if (!handover.ok) throw validationFailed([{ pointer: handover.pointer, message: handover.message }])
  if (handover.driver) await checkDriver(db, delivery, handover.driver.id, handover.driver.pointer)
  const parties = { from: handover.from, to: handover.to }
  if ('from' in input) await checkUserParties(db, delivery, input)
  switch (input.action) {
    case 'dispatch': {
      const warnings: SensorWarning[] = []
      await checkDispatch(db, principal, delivery, input, occurredAt, warnings)
      Object.assign(changes, {
        warnings: warnings.length ? toJson(warnings) : null,
        fleet_id: input.fleet_id,
        driver_id: input.driver_id ?? null,
        tote_id: input.tote_id ?? null,
        bound_from: input.tote_id ? occurredAt : null,
      })
      // docs/api.md, Proof of delivery: the requirements in force at dispatch are the delivery's.
      const requirements = await requirementsAtDispatch(db, delivery)
      changes.pod_requirements = requirements ? toJson(requirements) : null
      return { ...parties, evidence_hash: null, issuePin: Boolean(requirements?.pin) }
    }
    case 'pickup':
    case 'handoff':
    case 'return':
      return { ...parties, evidence_hash: evidenceHash(input.signature) }
    case 'deliver':
      // The method is hashed with the evidence so neither can be swapped later; the proofs enter
      // the event itself (`evidence`), so its hash covers each image's sha256.
      return {
        ...parties,
        evidence_hash: jcsHash({ method: input.verification.method, evidence: input.verification.evidence }),
        evidence: await checkedEvidence(db, pins, delivery, input.proof, occurredAt),
      }
    case 'fail':
      // The reason and note are also in the event's `attempt` member; hashed here as a cancel's reason is.
      return { ...parties, evidence_hash: jcsHash({ reason: input.reason, note: input.note ?? null }) }
    case 'reattempt': {
      if (input.driver_id) changes.driver_id = input.driver_id
      // A new attempt starts afresh: its ETA comes from its own positions (driver-positions.ts,
      // forgetEtaState), and a required PIN is issued anew with its own tries.
      changes.live_eta = null
      const requirements = fromJson<PodRequirements | null>(delivery.pod_requirements ?? null)
      return { ...parties, evidence_hash: null, issuePin: Boolean(requirements?.pin) }
    }
    case 'cancel':
      return { ...parties, evidence_hash: evidenceHash(input.reason) }
    case 'disposition': {
      const disposition: Disposition = {
        decision: input.decision,
        note: input.note,
        decided_by: { client_id: principal.clientId, sub: principal.sub },
        decided_at: occurredAt,
      }
      changes.disposition = toJson(disposition)
      return { ...parties, evidence_hash: jcsHash({ decision: input.decision, note: input.note }) }
    }
  }
}

/** When the action happened: the caller's `occurred_at`, neither in the future nor before the chain's last event. */
export function checkOccurredAt(value: string | undefined, previous: string, nowMs: number): string {
  if (value === undefined) return iso(nowMs)
  const at = Date.parse(value)
  if (at > nowMs + CLOCK_SKEW_MS) throw validationFailed([{ pointer: '/occurred_at', message: 'may not be in the future' }])
  if (at < Date.parse(previous))
    throw validationFailed([{ pointer: '/occurred_at', message: `may not be before the previous custody event (${previous})` }])
  return iso(at)
}

const evidenceHash = (text: string) => `sha256:${sha256Hex(text)}`
