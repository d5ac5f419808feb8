import type { Database } from 'better-sqlite3'

/**
 * Maps tote ids and (delivery_id, rx_id) bindings to the small integer keys the readings table
 * stores (see sqlite-sink.ts). Lookups hit an in-memory map; a miss reads or creates the row,
 * so it must run inside the write transaction.
 */
export type KeyDictionary = {
  toteKey(toteId: string): number
  /** null when the reading is not bound to a delivery. */
  bindingKey(deliveryId: string | null, rxId: string | null): number | null
  /** Drops the cache; call when a write transaction rolled back, taking new keys with it. */
  forget(): void
}

export function createKeyDictionary(db: Database, maxCached: number): KeyDictionary {
  const findTote = db.prepare<[string], { k: number }>('SELECT tote_key AS k FROM totes WHERE tote_id = ?')
  const addTote = db.prepare<[string]>('INSERT INTO totes (tote_id) VALUES (?)')
  // IS rather than =, so a binding with a null rx_id is found again (NULL = NULL is not true).
  const findBinding = db.prepare<[string | null, string | null], { k: number }>(
    'SELECT binding_key AS k FROM bindings WHERE delivery_id IS ? AND rx_id IS ?',
  )
  const addBinding = db.prepare<[string | null, string | null]>('INSERT INTO bindings (delivery_id, rx_id) VALUES (?, ?)')

  // Bounded crudely: when full, start over; a refill costs one indexed read per id.
  const totes = new Map<string, number>()
  // delivery_id → rx_id → key; nested so the hot path builds no composite string.
  const bindings = new Map<string | null, Map<string | null, number>>()

  return {
    toteKey(toteId) {
      const cached = totes.get(toteId)
      if (cached !== undefined) return cached
      const key = findTote.get(toteId)?.k ?? Number(addTote.run(toteId).lastInsertRowid)
      if (totes.size >= maxCached) totes.clear()
      totes.set(toteId, key)
      return key
    },
    bindingKey(deliveryId, rxId) {
      if (deliveryId === null && rxId === null) return null
      let byRx = bindings.get(deliveryId)
      const cached = byRx?.get(rxId)
      if (cached !== undefined) return cached
      const key = findBinding.get(deliveryId, rxId)?.k ?? Number(addBinding.run(deliveryId, rxId).lastInsertRowid)
      if (byRx === undefined) {
        if (bindings.size >= maxCached) bindings.clear()
        bindings.set(deliveryId, (byRx = new Map()))
      }
      byRx.set(rxId, key)
      return key
    },
    forget() {
      totes.clear()
      bindings.clear()
    },
  }
}
