import { afterAll, describe, expect, it } from 'vitest'
import { createPostgresSink } from '../../src/timeseries/postgres-sink.js'
import { isStoreUnavailable } from '../../src/store/errors.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'
import { startTcpProxy } from '../helpers/tcp-proxy.js'
import { describeReadingSinkContract, reading } from './sink-contract.js'

// DATABASE_URL without QUESTDB_CONFIG: readings in PostgreSQL, shared by every copy of the service.
const { url, reasons } = await reachablePostgres()
if (!url) console.warn(`Skipping the PostgreSQL sink suites: ${reasons.join('; ')}`)

describe.skipIf(!url && !process.env.CI)('PostgreSQL reading sink', () => {
  const schemas = postgresSchemas(url ?? 'postgres://unreachable')
  afterAll(() => schemas.drop())

  describeReadingSinkContract('PostgreSQL', async () => createPostgresSink({ url: url!, schema: await schemas.create() }))

  it('shows one copy’s readings to another copy on the same database', async () => {
    const schema = await schemas.create()
    const [a, b] = [createPostgresSink({ url: url!, schema }), createPostgresSink({ url: url!, schema })]
    try {
      const ts = Date.UTC(2025, 0, 1)
      await a.write([reading({ ts, seq: 1 })])
      await b.write([reading({ ts: ts + 1_000, seq: 2 }), reading({ ts, seq: 1 })]) // the first again: a retransmission to the other copy
      expect((await a.readingsForDelivery('dl_contract_1', 0, Infinity)).map((r) => r.seq)).toEqual([1, 2])
      expect(await b.count()).toBe(2)
    } finally {
      await Promise.all([a.close(), b.close()])
    }
  })

  it('announces the readings it is told to forward in the same transaction, and only stored ones', async () => {
    const schema = await schemas.create()
    const pg = (await import('pg')).default
    const listener = new pg.Client({ connectionString: url! })
    await listener.connect()
    const channel = `rx_forward_${schema}`
    const heard: string[] = []
    listener.on('notification', (n) => heard.push(n.payload ?? ''))
    await listener.query(`listen "${channel}"`)
    const sink = createPostgresSink({
      url: url!,
      schema,
      forward: { channel, payloads: (rows) => rows.filter((r) => r.seq === 7).map((r) => String(r.ts)) },
    })
    try {
      const ts = Date.UTC(2025, 0, 1)
      await sink.write([reading({ ts, seq: 7 }), reading({ ts: ts + 1, seq: 8 })])
      const bad = { ...reading({ ts: ts + 2, seq: 7 }), temp_c: null } as unknown as ReturnType<typeof reading>
      await expect(sink.write([bad])).rejects.toThrow(/null value/)
      await sink.write([reading({ ts: ts + 3, seq: 7 })]) // after the failed one: its notification would have come first
      await expect.poll(() => heard.length).toBe(2)
      expect(heard).toEqual([String(ts), String(ts + 3)])
    } finally {
      await sink.close()
      await listener.end()
    }
  })

  it('gives up on a silent database after the connect deadline, not the statement deadline', async () => {
    const schema = await schemas.create()
    const target = new URL(url!)
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    target.port = String(proxy.port)
    // A statement deadline far past the test's: a read that waited for it would never answer here.
    const limits = { connectTimeoutMs: 1_000, statementTimeoutMs: 600_000, idleInTransactionTimeoutMs: 60_000 }
    const sink = createPostgresSink({ url: target.toString(), schema, limits })
    try {
      await sink.write([reading({ ts: Date.UTC(2025, 0, 1), seq: 1 })]) // an open connection in the pool
      proxy.blackHole() // a partition: packets dropped, nothing refused
      const failures = await Promise.all([
        sink.readingsForDelivery('dl_contract_1', 0, Infinity).then(
          () => null,
          (error: unknown) => error,
        ),
        sink.count().then(
          () => null,
          (error: unknown) => error,
        ),
      ])
      expect(failures.map(isStoreUnavailable)).toEqual([true, true])
      proxy.forward()
      await expect.poll(() => sink.count().catch(() => -1), { timeout: 15_000, interval: 200 }).toBe(1)
    } finally {
      proxy.forward()
      await sink.close()
      await proxy.close()
    }
  }, 60_000)
})
