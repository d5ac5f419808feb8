// Types only, no imports: the service (custody.ts) and the console (shapes.ts) share this definition.

export type CustodyType =
  'created' | 'dispatched' | 'picked_up' | 'handoff' | 'delivered' | 'failed' | 'returned' | 'cancelled' | 'disposition'

/** A custody event exactly as the API returns it; `hash` covers every other member. */
export type CustodyEvent = {
  seq: number
  type: CustodyType
  actor: { client_id: string; sub: string }
  from: string | null
  to: string | null
  location: { lat: number; lng: number } | null
  evidence_hash: string | null
  occurred_at: string
  recorded_at: string
  prev_hash: string
  hash: string
}
