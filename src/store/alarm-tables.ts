/** The alarms of excursions and breaks (migration 0042; docs/api.md, Alarms). */
export interface AlarmTables {
  alarms: {
    id: string
    delivery_id: string
    pharmacy_id: string
    fleet_id: string | null
    rx_id: string | null
    /** excursion | break | sensor_gap | stability */
    kind: string
    /** The rule event's de-duplication key that raised it (unique per delivery). */
    source_key: string
    /** ACTIVE_UNACK | ACTIVE_ACK | CLEARED_UNACK | CLEARED_ACK (rules/alarm-lifecycle.ts). */
    state: string
    raised_at: string
    cleared_at: string | null
    acknowledged_by: string | null
    acknowledged_at: string | null
    note: string | null
    assigned_to: string | null
    /** raised_at + the pharmacy's escalate_after_s at the time it was raised. */
    escalate_at: string
    escalated_at: string | null
    version: number
  }
}
