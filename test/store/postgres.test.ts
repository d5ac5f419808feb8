import { afterAll, describe, it } from 'vitest'
import { describeConcurrency } from '../api/behaviours/concurrency.js'
import { describeDeliveryStates } from '../api/behaviours/delivery-states.js'
import { describeIdempotency } from '../api/behaviours/idempotency.js'
import { postgresStore, reachablePostgres } from '../helpers/stores.js'

// SPEC §1: PostgreSQL is the scale-out entity store, "same queries, one code path". The suites
// that run on SQLite in test/api run here unchanged, each service in its own schema.
const { url, reasons } = await reachablePostgres()

if (url) {
  const store = postgresStore(url)
  afterAll(() => store.cleanup())
  describeDeliveryStates(store)
  describeConcurrency(store)
  describeIdempotency(store)
} else if (process.env.CI) {
  describe('PostgreSQL entity store', () => {
    it('is reachable (required in CI)', () => {
      throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)
    })
  })
} else {
  console.warn(`Skipping the PostgreSQL store suites: ${reasons.join('; ')}`)
  describe.skipIf(true)('PostgreSQL entity store (unreachable)', () => {
    it('runs the store behaviour suites', () => {})
  })
}
