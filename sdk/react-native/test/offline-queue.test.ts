import { describe, expect, it } from 'vitest'
import { OfflineQueue, type Connectivity, type QueuedItem, type QueueStorage, type SendOutcome } from '../src/offline-queue.js'
import { signatureDataUrl } from '../src/signature.js'

/** AsyncStorage in memory: what a restarted app finds is what the last one saved. */
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

/** The phone's network, switched by the test. */
function network(online: boolean): Connectivity & { set(online: boolean): void } {
  const listeners = new Set<(online: boolean) => void>()
  return {
    isOnline: () => online,
    subscribe: (l) => {
      listeners.add(l)
      return () => listeners.delete(l)
    },
    set(next) {
      online = next
      for (const l of listeners) l(next)
    },
  }
}

/** An API that records what it was sent; `answer` decides each outcome. */
function api(answer: (a: QueuedItem, n: number) => SendOutcome = () => ({ kind: 'done' })) {
  const sent: QueuedItem[] = []
  return {
    sent,
    send: async (a: QueuedItem) => {
      sent.push(structuredClone(a))
      return answer(a, sent.length)
    },
  }
}

let clock = Date.parse('2026-11-23T09:00:00Z')
const now = () => clock
let ids = 0
const newId = () => `act_${++ids}`

describe('the offline queue', () => {
  it('keeps actions done offline and replays them in order, with the time they happened, once back online', async () => {
    const storage = memoryStorage()
    const net = network(false)
    const server = api()
    const queue = await OfflineQueue.open({ storage, connectivity: net, send: server.send, now, newId })
    await queue.enqueue({ delivery_id: 'dl_1', action: 'pickup', body: { from: 'ph_1', to: 'dr_1', signature: 'data:…' } })
    clock += 20 * 60_000
    await queue.enqueue({ delivery_id: 'dl_1', action: 'deliver', body: { verification: { method: 'otp', evidence: '123456' } } })
    expect(server.sent).toEqual([])
    expect(queue.pending).toHaveLength(2)

    clock += 45 * 60_000 // back in coverage much later
    net.set(true)
    await queue.flush()
    expect(server.sent.map((a) => [a.action, a.occurred_at])).toEqual([
      ['pickup', '2026-11-23T09:00:00.000Z'],
      ['deliver', '2026-11-23T09:20:00.000Z'],
    ])
    expect(queue.pending).toEqual([])
    expect(JSON.parse(storage.saved.get('rxtrace.offline-queue')!)).toEqual([])
  })

  it('survives the app being killed: a new queue on the same storage sends what the old one kept', async () => {
    const storage = memoryStorage()
    const first = await OfflineQueue.open({ storage, connectivity: network(false), send: api().send, now, newId })
    const kept = await first.enqueue({ delivery_id: 'dl_2', action: 'fail', body: { reason: 'Nobody home' } })
    first.close()
    const server = api()
    await OfflineQueue.open({ storage, connectivity: network(true), send: server.send, now, newId })
    expect(server.sent).toEqual([{ ...kept, attempts: 1 }])
  })

  it('retries with the same Idempotency-Key after a lost answer, and keeps the actions behind it waiting', async () => {
    const server = api((_, n) => (n === 1 ? { kind: 'retry', reason: 'timeout' } : { kind: 'done' }))
    const net = network(true)
    const queue = await OfflineQueue.open({ storage: memoryStorage(), connectivity: net, send: server.send, now, newId })
    await queue.enqueue({ delivery_id: 'dl_3', action: 'pickup', body: {} })
    await queue.flush()
    await queue.enqueue({ delivery_id: 'dl_3', action: 'handoff', body: {} })
    await queue.flush()
    expect(server.sent.map((a) => [a.action, a.attempts])).toEqual([
      ['pickup', 1],
      ['pickup', 2],
      ['handoff', 1],
    ])
    expect(server.sent[1]!.id).toBe(server.sent[0]!.id)
    expect(queue.pending).toEqual([])
  })

  it('drops an action the API refused for good, tells the app, and goes on with the next', async () => {
    const rejected: string[] = []
    const server = api((a) =>
      a.action === 'handoff' ? { kind: 'rejected', status: 409, problem: { code: 'invalid_transition' } } : { kind: 'done' },
    )
    const net = network(false)
    const queue = await OfflineQueue.open({
      storage: memoryStorage(),
      connectivity: net,
      send: server.send,
      now,
      newId,
      onRejected: (a, o) => rejected.push(`${a.action} ${o.status}`),
    })
    for (const action of ['handoff', 'deliver'] as const) await queue.enqueue({ delivery_id: 'dl_4', action, body: {} })
    net.set(true)
    await queue.flush()
    expect(rejected).toEqual(['handoff 409'])
    expect(server.sent.map((a) => a.action)).toEqual(['handoff', 'deliver'])
    expect(queue.pending).toEqual([])
  })

  it('sends each action once when flushes overlap (enqueue, reconnect and a manual flush at the same moment)', async () => {
    const server = api()
    const net = network(false)
    const queue = await OfflineQueue.open({ storage: memoryStorage(), connectivity: net, send: server.send, now, newId })
    await queue.enqueue({ delivery_id: 'dl_5', action: 'pickup', body: {} })
    await queue.enqueue({ delivery_id: 'dl_5', action: 'deliver', body: {} })
    net.set(true)
    await Promise.all([
      queue.flush(),
      queue.flush(),
      queue.enqueue({ delivery_id: 'dl_5', action: 'return', body: {} }).then(() => queue.flush()),
    ])
    await queue.flush()
    expect(server.sent.map((a) => a.action)).toEqual(['pickup', 'deliver', 'return'])
  })

  it('counts a thrown send (no network) as one to retry, not a loss', async () => {
    let fail = true
    const sent: string[] = []
    const queue = await OfflineQueue.open({
      storage: memoryStorage(),
      connectivity: network(true),
      now,
      newId,
      send: async (a) => {
        if (fail) throw new TypeError('Network request failed')
        sent.push(a.action)
        return { kind: 'done' }
      },
    })
    await queue.enqueue({ delivery_id: 'dl_6', action: 'pickup', body: {} })
    await queue.flush()
    expect(queue.pending).toHaveLength(1)
    fail = false
    await queue.flush()
    expect(sent).toEqual(['pickup'])
  })
})

describe('a signature as a data URL', () => {
  it('is an SVG image of the strokes, and an empty pad is refused', () => {
    const url = signatureDataUrl(
      [
        [
          { x: 10, y: 20 },
          { x: 30.04, y: 40 },
        ],
        [{ x: 5, y: 5 }],
      ],
      300,
      150,
    )
    expect(url.startsWith('data:image/svg+xml;charset=utf-8,')).toBe(true)
    const svg = decodeURIComponent(url.slice(url.indexOf(',') + 1))
    expect(svg).toContain('viewBox="0 0 300 150"')
    expect(svg).toContain('<path d="M10 20L30 40"/>')
    expect(svg).toContain('<path d="M5 5L5 5"/>')
    expect(() => signatureDataUrl([[]], 300, 150)).toThrow('empty')
  })
})
