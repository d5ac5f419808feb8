import { afterAll, describe, it } from 'vitest'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'
import { describeAttempts } from './behaviours/attempts.js'

describeAttempts(sqliteStore)

const { url, reasons } = await reachablePostgres()
if (url) {
  const store = postgresStore(url)
  afterAll(() => store.cleanup())
  describeAttempts(store)
} else if (process.env.CI) {
  describe('PostgreSQL entity store', () => {
    it('is reachable (required in CI)', () => {
      throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)
    })
  })
}
