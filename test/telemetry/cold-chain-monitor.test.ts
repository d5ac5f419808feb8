import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ColdChainMonitor } from '../../src/telemetry/cold-chain-monitor.js'

const profile = JSON.parse(readFileSync(new URL('../../rules/profiles/refrigerated.json', import.meta.url), 'utf8'))
const open = (id: string) => ({ toteId: `t_${id}`, binding: { deliveryId: id, rxId: `rx_${id}`, pharmacyId: 'ph_1', fleetId: null, profile, fromMs: 0, toMs: null } })

describe('the cold-chain monitor watching open deliveries', () => {
  it('watches a delivery dispatched during a pass even when another delivery cannot be read', async () => {
    // Loading X's history fails (a transient read error); every other delivery loads.
    const sink = { readingsForDelivery: (id: string) => new Promise((resolve, reject) => setTimeout(() => (id === 'X' ? reject(new Error('read failed')) : resolve([])), 5)) }
    const quiet = { info() {}, error() {}, warn() {}, debug() {} }
    const monitor = new ColdChainMonitor({ db: {}, sink, outbox: {}, clock: { now: () => Date.now() }, metrics: {}, logger: quiet, windowMs: 1_000 } as never)
    const first = monitor.watchOpenDeliveries([open('A'), open('X')])
    const second = monitor.watchOpenDeliveries([open('A'), open('X'), open('D')]) // D dispatched meanwhile
    await expect(first).rejects.toThrow('read failed') // X is still unreadable: the refresh retries it
    await expect(second).rejects.toThrow('read failed')
    expect(monitor.state('A')).toBeTruthy()
    expect(monitor.state('D')).toBeTruthy()
    expect(monitor.state('X')).toBeFalsy()
  })
})
