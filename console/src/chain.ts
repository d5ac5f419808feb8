import canonicalize from 'canonicalize'
import type { CustodyEvent, Prescription } from './api'

// The custody chain checked in the browser itself, exactly as the service hashes it
// (src/hashing.ts, src/domain/custody.ts): "sha256:" + hex(SHA-256(RFC 8785 JCS(value))),
// with the same JCS library, over the API's JSON as received; SHA-256 from WebCrypto.

async function jcsHash(value: unknown): Promise<string> {
  const text = canonicalize(value)
  if (text === undefined) throw new Error('not canonicalizable')
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)))
  return `sha256:${Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('')}`
}

export type Verdict = { valid: true; length: number; head: string } | { valid: false; length: number; firstBadSeq: number; reason: string }

export async function verifyInBrowser(rx: Prescription, deliveryId: string, events: readonly CustodyEvent[]): Promise<Verdict> {
  const { rx_id, pharmacy_id, patient_id, cold_chain, temperature_profile, created_at } = rx
  const audit = await jcsHash({ rx_id, pharmacy_id, patient_id, cold_chain, temperature_profile, created_at })
  if (audit !== rx.audit_hash)
    return { valid: false, length: events.length, firstBadSeq: 1, reason: "the prescription's audit hash does not match its facts" }
  let head = audit
  for (const [index, event] of events.entries()) {
    const expected = index + 1
    const { hash, ...unsigned } = event
    const fail = (reason: string): Verdict => ({ valid: false, length: events.length, firstBadSeq: expected, reason })
    if (event.seq !== expected) return fail(`expected seq ${expected}`)
    if (event.prev_hash !== head) return fail('prev_hash does not match the previous event')
    if ((await jcsHash(unsigned)) !== hash) return fail('hash does not match the event')
    // An e-signature binds to the event before it (src/domain/e-signature.ts): copied elsewhere it does not add up.
    if (event.type === 'signed') {
      const signed = events[index - 1]
      const bound = signed && event.signature && (await jcsHash({ delivery_id: deliveryId, event: signed })) === event.signature.record_hash
      if (!bound) return fail('the signature does not bind to the record it follows')
    }
    head = hash
  }
  return { valid: true, length: events.length, head }
}
