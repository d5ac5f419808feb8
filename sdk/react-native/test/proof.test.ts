import { describe, expect, it } from 'vitest'
import { OfflineQueue, type Connectivity, type QueuedItem, type QueueStorage, type SendOutcome } from '../src/offline-queue.js'
import { deliverBody, enqueueDeliver, missingProofs, type PodRequirements, type ProofCapture } from '../src/proof.js'

function memoryStorage(): QueueStorage & { saved: Map<string, string> } {
  const saved = new Map<string, string>()
  return {
    saved,
    getItem: async (k) => saved.get(k) ?? null,
    setItem: async (k, v) => {
      saved.set(k, v)
    },
  }
}

/** The phone's network; `set(…, false)` changes it without telling the queue (no flush of its own). */
function network(online: boolean): Connectivity & { set(online: boolean, tell?: boolean): void } {
  const listeners = new Set<(online: boolean) => void>()
  return {
    isOnline: () => online,
    subscribe: (l) => {
      listeners.add(l)
      return () => listeners.delete(l)
    },
    set(next, tell = true) {
      online = next
      if (tell) for (const l of listeners) l(next)
    },
  }
}

/** An API that answers uploads with `at_<n>` and records what it was sent. */
function api(answer: (item: QueuedItem, n: number) => SendOutcome | undefined = () => undefined) {
  const sent: QueuedItem[] = []
  let uploads = 0
  return {
    sent,
    send: async (item: QueuedItem): Promise<SendOutcome> => {
      sent.push(structuredClone(item))
      const given = answer(item, sent.length)
      if (given) return given
      if (item.action === 'upload') return { kind: 'done', attachment: { id: `at_${++uploads}`, sha256: 'ab'.repeat(32) } }
      return { kind: 'done' }
    },
  }
}

let ids = 0
const newId = () => `act_${++ids}`
const now = () => Date.parse('2026-11-29T09:00:00Z')

const photo = { uri: 'file:///photos/door.jpg', content_type: 'image/jpeg' } as const
const signed = { base64: 'iVBORw0KGgo=', content_type: 'image/png' } as const
const verification = { method: 'otp', evidence: '123456' } as const
const everything: PodRequirements = {
  signature: true,
  photo: true,
  pin: true,
  barcode: true,
  id_check: { minimum_age: 21, document_types: ['drivers_license', 'passport'] },
}
const full: ProofCapture = {
  verification,
  photo,
  pin: '4821',
  signature: { image: signed, signer_name: ' Pat Doe ', relationship: 'spouse' },
  id_check: { document_type: 'passport', minimum_age: 21, birth_date_verified: true },
  barcode: 'rx_01',
}

describe('proof of delivery: what blocks Delivered', () => {
  it('names every required proof still missing, and nothing when none is required', () => {
    expect(missingProofs(everything, { verification })).toEqual(['signature', 'photo', 'pin', 'id_check', 'barcode'])
    expect(missingProofs(everything, full)).toEqual([])
    expect(missingProofs(null, { verification })).toEqual([])
    expect(missingProofs({ photo: true }, { verification, pin: '12' })).toEqual(['photo'])
  })

  it('refuses a PIN that is not 4–6 digits, a half-filled signature, and an ID check that does not hold', () => {
    for (const pin of ['123', '1234567', '12a4', '']) expect(missingProofs({ pin: true }, { ...full, pin })).toEqual(['pin'])
    for (const pin of ['1234', '123456']) expect(missingProofs({ pin: true }, { ...full, pin })).toEqual([])
    expect(missingProofs({ signature: true }, { ...full, signature: { image: signed, signer_name: 'Pat', relationship: ' ' } })).toEqual([
      'signature',
    ])
    const id = full.id_check!
    expect(missingProofs(everything, { ...full, id_check: { ...id, birth_date_verified: false } })).toEqual(['id_check'])
    expect(missingProofs(everything, { ...full, id_check: { ...id, minimum_age: 18 } })).toEqual(['id_check'])
    expect(missingProofs(everything, { ...full, id_check: { ...id, document_type: 'state_id' } })).toEqual(['id_check'])
    // No document types named: any document will do.
    expect(missingProofs({ id_check: { minimum_age: 0 } }, { ...full, id_check: { ...id, document_type: 'other' } })).toEqual([])
  })
})

describe('proof of delivery: the deliver body', () => {
  it('is {verification, proof} with the images named by their attachment ids and the rest as captured', () => {
    const body = deliverBody(full, (image) => (image === photo ? 'at_photo' : 'at_sig'))
    expect(body).toEqual({
      verification,
      proof: {
        photo: 'at_photo',
        pin: '4821',
        signature: { attachment: 'at_sig', signer_name: 'Pat Doe', relationship: 'spouse' },
        id_check: { document_type: 'passport', minimum_age: 21, birth_date_verified: true },
        barcode: 'rx_01',
      },
    })
    expect(deliverBody({ verification, barcode: 'rx_01' }, () => 'unused')).toEqual({ verification, proof: { barcode: 'rx_01' } })
  })
})

describe('proof of delivery in the offline queue', () => {
  it('offline, keeps the uploads ahead of their deliver; online, sends them first and the deliver with the ids they were answered', async () => {
    const storage = memoryStorage()
    const net = network(false)
    const server = api()
    const queue = await OfflineQueue.open({ storage, connectivity: net, send: server.send, now, newId })
    await enqueueDeliver(queue, 'dl_1', full)
    expect(queue.pending.map((a) => a.action)).toEqual(['upload', 'upload', 'deliver'])
    expect(server.sent).toEqual([])
    // A killed app finds all three where it left them.
    expect((JSON.parse(storage.saved.get('rxtrace.offline-queue')!) as QueuedItem[]).map((a) => a.action)).toEqual([
      'upload',
      'upload',
      'deliver',
    ])

    net.set(true)
    await queue.flush()
    expect(server.sent.map((a) => a.action)).toEqual(['upload', 'upload', 'deliver'])
    expect(server.sent[0]).toMatchObject({ delivery_id: 'dl_1', image: photo })
    expect(server.sent[1]).toMatchObject({ delivery_id: 'dl_1', image: signed })
    const deliver = server.sent[2]!
    expect(deliver.action === 'deliver' && deliver.body).toEqual({
      verification,
      proof: {
        photo: 'at_1',
        pin: '4821',
        signature: { attachment: 'at_2', signer_name: 'Pat Doe', relationship: 'spouse' },
        id_check: { document_type: 'passport', minimum_age: 21, birth_date_verified: true },
        barcode: 'rx_01',
      },
    })
    expect(queue.pending).toEqual([])
  })

  it('retries an upload that got no answer, holding the deliver back, and stores the id the moment the upload is answered', async () => {
    const storage = memoryStorage()
    const net = network(false)
    // The first upload's first try is lost; the signature's upload succeeds; the deliver then times out once.
    const server = api((item, n) => (n === 1 || (item.action === 'deliver' && n === 4) ? { kind: 'retry', reason: 'timeout' } : undefined))
    const queue = await OfflineQueue.open({ storage, connectivity: net, send: server.send, now, newId })
    await enqueueDeliver(queue, 'dl_2', full)
    net.set(true, false)
    await queue.flush()
    expect(server.sent.map((a) => [a.action, a.attempts])).toEqual([['upload', 1]])
    expect(queue.pending.map((a) => a.action)).toEqual(['upload', 'upload', 'deliver'])

    await queue.flush()
    // The photo again (same item), the signature, the deliver (lost): the ids are already in the stored deliver.
    expect(server.sent.map((a) => [a.action, a.attempts])).toEqual([
      ['upload', 1],
      ['upload', 2],
      ['upload', 1],
      ['deliver', 1],
    ])
    expect(server.sent[1]!.id).toBe(server.sent[0]!.id)
    const stored = JSON.parse(storage.saved.get('rxtrace.offline-queue')!) as QueuedItem[]
    expect(stored).toHaveLength(1)
    expect(stored[0]!.action === 'deliver' && stored[0]!.body.proof).toMatchObject({ photo: 'at_1', signature: { attachment: 'at_2' } })

    // A new run of the app sends that deliver with the same Idempotency-Key and the same ids; no image again.
    const later = api()
    await OfflineQueue.open({ storage, connectivity: network(true), send: later.send, now, newId })
    expect(later.sent.map((a) => a.action)).toEqual(['deliver'])
    expect(later.sent[0]!.id).toBe(server.sent[3]!.id)
    expect(later.sent[0]!.action === 'deliver' && later.sent[0]!.body.proof).toMatchObject({
      photo: 'at_1',
      signature: { attachment: 'at_2' },
    })
  })

  it('does not send a deliver whose image the API refused: both are reported, and the next action goes on', async () => {
    const rejected: string[] = []
    const server = api((item) =>
      item.action === 'upload' ? { kind: 'rejected', status: 415, problem: { code: 'unsupported_media_type' } } : undefined,
    )
    const net = network(false)
    const queue = await OfflineQueue.open({
      storage: memoryStorage(),
      connectivity: net,
      send: server.send,
      now,
      newId,
      onRejected: (item, outcome) => rejected.push(`${item.action} ${outcome.status} ${(outcome.problem as { code: string }).code}`),
    })
    await enqueueDeliver(queue, 'dl_3', { verification, photo })
    await queue.enqueue({ delivery_id: 'dl_3', action: 'fail', body: { reason: 'refused', note: 'Would not sign' } })
    net.set(true)
    await queue.flush()
    expect(rejected).toEqual(['upload 415 unsupported_media_type', 'deliver 424 upload_rejected'])
    expect(server.sent.map((a) => a.action)).toEqual(['upload', 'fail'])
    expect(queue.pending).toEqual([])
  })

  it('queues reattempt and fail with a coded reason like any action, and refuses a body naming an upload it was not given', async () => {
    const server = api()
    const queue = await OfflineQueue.open({ storage: memoryStorage(), connectivity: network(true), send: server.send, now, newId })
    await queue.enqueue({ delivery_id: 'dl_4', action: 'fail', body: { reason: 'patient_unavailable', note: 'Nobody home' } })
    await queue.enqueue({ delivery_id: 'dl_4', action: 'reattempt', body: {} })
    await queue.flush()
    expect(server.sent.map((a) => a.action)).toEqual(['fail', 'reattempt'])
    await expect(
      queue.enqueue({ delivery_id: 'dl_4', action: 'deliver', body: { verification, proof: { photo: { $upload: 'photo' } } } }),
    ).rejects.toThrow('not among its uploads')
    expect(queue.pending).toEqual([])
  })
})
