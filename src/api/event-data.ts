import type {
  BudgetLowEventData,
  ColdChainBreakData,
  ExcursionEventData,
  RecoveredEventData,
  SensorOfflineEventData,
} from '../../rules/index.js'
import { alarmKinds, alarmStates, breakReasons, excursionKinds, exhaustedReasons } from '../../rules/index.js'
import { deliveryActions, deliveryStatuses } from '../domain/delivery-machine.js'
import { storedSignatureSchema } from '../domain/e-signature.js'
import type { EventType } from '../events/fanout.js'
import { patientNoticeKinds } from '../services/patient-notices.js'
import { z } from './openapi.js'

/**
 * The `data` of each event type, as the webhooks and GET /v1/events carry it (docs/webhooks.md).
 * Keyed by every type of `eventTypes`: a type added there does not compile until its data is
 * described here. Members may be added to a type's data later; none is removed or changes type.
 */

const time = z.string().describe('RFC 3339 UTC')
const hash = z.string().describe('`sha256:` and 64 hex digits')

/** What each delivery action's events carry (src/services/deliveries.ts): the move and the custody event it appended. */
const move = {
  status: z.enum(deliveryStatuses).describe('The delivery status after the action'),
  previous_status: z.enum(deliveryStatuses),
  action: z.enum(deliveryActions),
  occurred_at: time.describe('When it happened (the action’s `occurred_at`, or when it was recorded)'),
  from: z.string().nullable().describe('The party handing over custody (`ph_…`, `dr_…`), null when custody does not change hands'),
  to: z.string().nullable().describe('The party taking custody (`dr_…`, `ph_…`, or `patient`)'),
  custody_seq: z.number().int().describe('The custody event this action appended'),
  custody_hash: hash,
}
const Move = z.object(move)
const verified = { verification_method: z.enum(['otp', 'id_check', 'signature']) }
const reason = { reason: z.string().describe('As the caller gave it') }

/** Members the cold-chain monitor adds to every rule event (src/telemetry/cold-chain/event-emission.ts). */
const fromTote = { tote_id: z.string(), at: time.describe('The event time: the reading (or the silence) that raised it') }

const Excursion = z.object({
  excursion_started_at: time,
  kind: z.enum(excursionKinds).describe('high/low: the side of the farthest reading; unknown: only sensor-gap time so far'),
  peak_c: z.number().nullable().describe('The reading farthest outside the range so far; null when only unknown time'),
  min_c: z.number(),
  max_c: z.number(),
  grace_s: z.number(),
  ...fromTote,
}) satisfies z.ZodType<ExcursionEventData>

const Recovered = z.object({
  excursion_started_at: time,
  recovered_at: time,
  duration_s: z.number(),
  kind: z.enum(excursionKinds),
  peak_c: z.number().nullable(),
  temp_c: z.number().describe('The in-range reading that ended the excursion'),
  unknown_s: z.number().describe('Part of `duration_s` that was sensor-gap time'),
  ...fromTote,
}) satisfies z.ZodType<RecoveredEventData>

const Band = z.object({ min_c: z.number(), max_c: z.number(), allowed_s: z.number() })

/** docs/stability.md: the item whose product stability budget ran out. */
const ExhaustedItem = z.object({
  item: z.number().int().describe('Position among the items that name a product'),
  ndc: z.string(),
  product_id: z.string(),
  version: z.number().int().describe('The stability version it was judged by'),
  reason: z.enum(exhaustedReasons),
  band: Band.nullable().describe('The band whose budget ran out (band_budget); null for the other reasons'),
  exhausted_at: time,
  temp_c: z.number().nullable().describe('The temperature charged or read; null in sensor-gap time'),
})

const Break = z.object({
  reason: z.enum(breakReasons),
  threshold: z
    .enum(['hard_min_c', 'hard_max_c', 'max_excursion_s', 'max_cumulative_s', 'mkt_max_c', 'stability'])
    .describe('The profile member crossed; `stability` for stability_exhausted (see `item`)'),
  limit: z.number().describe("The profile's value for `threshold`; for `stability` the exhausted band's allowed_s, else 0"),
  broken_at: time,
  temp_c: z.number().nullable(),
  excursion_started_at: time.nullable(),
  excursion_duration_s: z.number().nullable(),
  time_out_of_range_s: z.number().describe('Cumulative out-of-range time at the break, sensor gaps included'),
  unknown_s: z.number(),
  mkt_c: z.number().nullable().describe('Mean kinetic temperature of the readings so far, 0.01 °C'),
  profile: z.string(),
  item: ExhaustedItem.optional().describe('stability_exhausted only: the item that ran out'),
  ...fromTote,
}) satisfies z.ZodType<ColdChainBreakData>

const BudgetLow = z.object({
  item: z.number().int(),
  ndc: z.string(),
  product_id: z.string(),
  version: z.number().int(),
  band: Band,
  remaining_s: z.number().describe('What was left at that instant: a fifth of the band’s budget'),
  ...fromTote,
}) satisfies z.ZodType<BudgetLowEventData>

const Offline = z.object({
  last_reading_at: time.nullable().describe('Null when the tote sent nothing since it was bound'),
  offline_since: time.describe('From here on the temperature is unknown'),
  back_online_at: time.nullable().describe('The reading that ended the gap; null when raised by the silence itself'),
  max_gap_s: z.number(),
  ...fromTote,
}) satisfies z.ZodType<SensorOfflineEventData>

/** A writeback's outcome (src/webhooks/sql-queue.ts, announceWriteback). */
const Writeback = z.object({
  outcome_event_id: z.string().describe('The `delivery.delivered` or `delivery.returned` event that was written back'),
  outcome: z.enum(['delivery.delivered', 'delivery.returned']),
  attempts: z.number().int(),
  status_code: z.number().int().nullable().describe("The pharmacy's last answer; null when it could not be reached"),
  error: z.string().nullable(),
})

/** An alarm as it stood when the event was written (src/alarms/alarm-records.ts). */
const AlarmData = z.object({
  alarm_id: z.string(),
  kind: z.enum(alarmKinds),
  state: z.enum(alarmStates),
  raised_at: time,
  cleared_at: time.nullable(),
  acknowledged_by: z.string().nullable().describe('The user (`us_…`) or client who acknowledged it'),
  acknowledged_at: time.nullable(),
  note: z.string().nullable(),
  assigned_to: z.string().nullable(),
  escalate_at: time.describe('When it is (or was) due for escalation: raised + the pharmacy’s escalate_after_s'),
})

export const eventData = {
  'delivery.created': z.object({
    status: z.literal('QUEUED'),
    cold_chain: z.boolean(),
    profile: z.string().nullable().describe('The temperature profile, null without a cold chain'),
    eta: time.describe('The promised delivery time'),
    audit_hash: hash.describe('The prescription as received (RFC 8785 canonical JSON)'),
    leg: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('1, or n + 1 for the n-th redelivery of the prescription (absent before legs existed)'),
  }),
  'delivery.dispatched': Move.extend({ fleet_id: z.string(), driver_id: z.string().nullable(), tote_id: z.string().nullable() }),
  'delivery.picked-up': Move,
  'delivery.delivered': Move.extend(verified),
  'delivery.failed': Move.extend({
    reason: z
      .string()
      .describe(
        '`patient_unavailable`, `address_problem`, `refused`, `unsafe` or `other` (docs/api.md, Attempts); free text in events from before reasons were coded',
      ),
    note: z.string().nullable().optional().describe('The driver’s words, if any; absent in events from before reasons were coded'),
    attempt: z.number().int().optional().describe('The attempt that failed, 1 for the first'),
  }),
  'delivery.reattempted': Move.extend({
    attempt: z.number().int().describe('The attempt it starts: 2 for the first reattempt'),
    driver_id: z.string().nullable().describe('The driver of this attempt'),
  }).describe("The same tote sent out again after a failed attempt, within the pharmacy's max_attempts"),
  'delivery.returned': Move,
  'delivery.cancelled': Move.extend(reason),
  'delivery.eta-changed': z
    .object({
      eta: time.describe('The ETA now'),
      previous_eta: time.describe('The ETA announced before (the promised one, before the first change)'),
      source: z.enum(['computed', 'router']).describe('Computed from the driver’s position, or posted by the fleet’s router'),
      distance_m: z.number().int().nullable().describe('Straight-line metres from the driver to the address; null for a router’s ETA'),
    })
    .describe('The ETA of a delivery on its way moved by 5 minutes or more; at most one a minute per delivery (docs/fleet.md)'),
  'delivery.arriving': z
    .object({
      eta: time,
      distance_m: z.number().int().describe('Straight-line metres from the driver to the address (≤ 500)'),
    })
    .describe('The driver is within 500 m of the delivery address; once per delivery'),
  'custody.handoff-signed': Move.describe('A pickup, a handoff between drivers, or a return to the pharmacy'),
  'custody.patient-verified': Move.extend(verified),
  'temperature.excursion': Excursion,
  'temperature.recovered': Recovered,
  'cold-chain.break': Break,
  'cold-chain.disposition': Move.extend({
    decision: z.enum(['release', 'return']),
    signature: storedSignatureSchema.optional().describe("The pharmacist's e-signature of the decision (docs/part11.md)"),
  }),
  'sensor.offline': Offline,
  'stability.budget-low': BudgetLow,
  'writeback.completed': Writeback,
  'writeback.failed': Writeback,
  'handoff.refused': z.object({
    action: move.action,
    code: z.string().describe('The refusal’s problem `code`'),
    reason: z.string(),
    errors: z.array(z.object({ pointer: z.string(), message: z.string() })),
    status: z.enum(deliveryStatuses),
    from: z.string().nullable(),
    to: z.string().nullable(),
    occurred_at: time.nullable(),
    refused_at: time,
  }),
  'alarm.acknowledged': AlarmData.describe('A person acknowledged the alarm, with a note'),
  'alarm.escalated': AlarmData.describe('Nobody acknowledged the alarm within the pharmacy’s escalate_after_s; emitted once per alarm'),
  'patient.notify': z
    .object({
      kind: z
        .enum(patientNoticeKinds)
        .describe(
          'What to tell the patient: link_issued (a link was asked for), dispatched, out_for_delivery (picked up), arriving (the driver within 500 m), delivered, attempt_failed, cancelled',
        ),
      tracking_url: z
        .string()
        .describe("The patient's tracking page, signed for this message: send it, never log it (it shows the delivery's PIN)"),
      link_expires_at: time.describe('When the link stops working at the latest; it also stops 24 h after the delivery ends'),
    })
    .describe(
      'For pharmacies with `patient_notify`: a message for the pharmacy’s own SMS or e-mail provider to send the patient (docs/api.md, Patient notifications). Sent to the pharmacy’s endpoints only, never a fleet’s.',
    ),
} satisfies Record<EventType, z.ZodType>
