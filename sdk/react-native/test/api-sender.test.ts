import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createRxtraceClient } from '@rxtrace/sdk'
import { apiSender } from '../src/api-sender.js'
import { OfflineQueue, type Connectivity, type QueueStorage } from '../src/offline-queue.js'
import { enqueueDeliver } from '../src/proof.js'
import { signatureDataUrl } from '../src/signature.js'
import { ADMIN, listeningService } from '../../test/service.js'
import type { TestApi } from '../../../test/helpers/service.js'

describe('the offline queue sending to the real service', () => {
  let api: TestApi
  let baseUrl: string
  beforeAll(async () => {
    ;({ api, baseUrl } = await listeningService())
  })
  afterAll(() => api?.stop())

  it('records a pickup and a delivery done offline at the times they happened, once, even when a send is repeated', async () => {
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const rx1 = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    expect((await api.post(`/v1/deliveries/${rx1.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })).status).toBe(
      200,
    )

    const saved = new Map<string, string>()
    const storage: QueueStorage = {
      getItem: async (k) => saved.get(k) ?? null,
      setItem: async (k, v) => {
        saved.set(k, v)
      },
    }
    let online = false
    const listeners: ((online: boolean) => void)[] = []
    const connectivity: Connectivity = {
      isOnline: () => online,
      subscribe: (l) => {
        listeners.push(l)
        return () => {}
      },
    }
    const rx = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const send = apiSender(rx)
    let sends = 0
    const queue = await OfflineQueue.open({
      storage,
      connectivity,
      send: async (a) => {
        sends++
        const first = await send(a)
        return sends === 1 ? { kind: 'retry', reason: 'answer lost' } : first
      },
    })

    const signature = signatureDataUrl(
      [
        [
          { x: 1, y: 1 },
          { x: 40, y: 12 },
        ],
      ],
      300,
      150,
    )
    const pickup = await queue.enqueue({
      delivery_id: rx1.delivery_id,
      action: 'pickup',
      body: { from: pharmacy.id, to: driverId, signature },
    })
    const deliver = await queue.enqueue({
      delivery_id: rx1.delivery_id,
      action: 'deliver',
      body: { verification: { method: 'otp', evidence: '123456' } },
    })
    online = true
    for (const l of listeners) l(true)
    await queue.flush()
    expect(queue.pending).toEqual([])

    const delivery = (await rx.api.GET('/v1/deliveries/{id}', { params: { path: { id: rx1.delivery_id } } })).data!
    expect(delivery.status).toBe('DELIVERED')
    // The repeated pickup was answered from the first request (same Idempotency-Key): one custody event each.
    expect(delivery.custody.map((e) => e.type)).toEqual(['created', 'dispatched', 'picked_up', 'delivered'])
    expect(delivery.custody[2]!.occurred_at).toBe(pickup.occurred_at)
    expect(delivery.custody[3]!.occurred_at).toBe(deliver.occurred_at)
    expect(sends).toBe(3)
  })

  it('uploads a photo and a signature taken offline, then delivers naming them: the custody event carries their sha256', async () => {
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin, { pod_requirements: { photo: true, signature: true, barcode: true } })
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const rx1 = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await api.post(`/v1/deliveries/${rx1.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })
    await api.post(`/v1/deliveries/${rx1.delivery_id}/pickup`, admin, { from: pharmacy.id, to: driverId, signature: 'data:,signed' })

    const saved = new Map<string, string>()
    const storage: QueueStorage = {
      getItem: async (k) => saved.get(k) ?? null,
      setItem: async (k, v) => {
        saved.set(k, v)
      },
    }
    let online = false
    const listeners: ((online: boolean) => void)[] = []
    const connectivity: Connectivity = {
      isOnline: () => online,
      subscribe: (l) => {
        listeners.push(l)
        return () => {}
      },
    }
    const rx = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    // The photo is a file the camera wrote (here a data: URI Node's fetch reads); the signature, bytes in base64.
    const photo = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
    const signature = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='
    const queue = await OfflineQueue.open({ storage, connectivity, send: apiSender(rx) })
    await enqueueDeliver(queue, rx1.delivery_id, {
      verification: { method: 'signature', evidence: 'signed at the door' },
      photo: { uri: `data:image/png;base64,${photo}`, content_type: 'image/png' },
      signature: { image: { base64: signature, content_type: 'image/png' }, signer_name: 'Pat Doe', relationship: 'self' },
      barcode: rx1.rx_id,
    })
    expect(queue.pending.map((a) => a.action)).toEqual(['upload', 'upload', 'deliver'])
    online = true
    for (const l of listeners) l(true)
    await queue.flush()
    expect(queue.pending).toEqual([])

    const delivery = (await rx.api.GET('/v1/deliveries/{id}', { params: { path: { id: rx1.delivery_id } } })).data!
    expect(delivery.status).toBe('DELIVERED')
    const sha = async (b64: string) => Buffer.from(await crypto.subtle.digest('SHA-256', Buffer.from(b64, 'base64'))).toString('hex')
    const evidence = (delivery.custody.at(-1) as { evidence?: Record<string, { attachment: string; sha256: string }> }).evidence!
    expect(evidence.photo!.sha256).toBe(await sha(photo))
    expect(evidence.signature).toMatchObject({ sha256: await sha(signature), signer_name: 'Pat Doe', relationship: 'self' })
    expect(evidence.photo!.attachment).toMatch(/^at_/)
    expect(evidence.signature!.attachment).not.toBe(evidence.photo!.attachment)
  })
})
