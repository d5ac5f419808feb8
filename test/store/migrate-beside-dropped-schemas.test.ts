import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { openEntityStore } from '../../src/store/database.js'
import { reachablePostgres } from '../helpers/stores.js'

/**
 * Other applications (or other test runs) create and drop their own schemas in the same
 * database. A store starting meanwhile must still migrate its own schema: once, CI failed with
 * `schema "rx_test_…" does not exist` because the migrator looked at every schema by name.
 */
const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

describe.skipIf(!url)('migrating a PostgreSQL store while other schemas come and go', () => {
  const ours: string[] = []
  afterAll(async () => {
    const client = new pg.Client({ connectionString: url! })
    await client.connect()
    for (const schema of ours) await client.query(`drop schema if exists "${schema}" cascade`)
    await client.end()
  })

  it('migrates every time', async () => {
    const churn = new pg.Client({ connectionString: url! })
    await churn.connect()
    let stop = false
    const churning = (async () => {
      while (!stop) {
        const other = `rx_churn_${randomBytes(6).toString('hex')}`
        await churn.query(`create schema "${other}"; create table "${other}".t (id int); create table "${other}".u (id int)`)
        await churn.query(`drop schema "${other}" cascade`)
      }
    })()
    const failures: string[] = []
    try {
      for (let i = 0; i < 15; i++) {
        const schema = `rx_test_${randomBytes(6).toString('hex')}`
        ours.push(schema)
        const store = await openEntityStore({ kind: 'postgres', url: url!, schema }).catch((error: Error) => {
          failures.push(error.message)
          return null
        })
        await store?.close()
      }
    } finally {
      stop = true
      await churning
      await churn.end()
    }
    expect(failures).toEqual([])
  }, 90_000) // 15 whole migrations beside the churn: past 30 s on a loaded 2-core machine
})
