import { describe, it } from 'vitest'
import { postgresStore, reachablePostgres } from '../helpers/stores.js'
import { describeProofOfDelivery } from './behaviours.js'

// Proof of delivery on PostgreSQL: attachments in bytea chunks, PINs sealed, wrong tries counted by the store.
const { url, reasons } = await reachablePostgres()

if (url) describeProofOfDelivery(postgresStore(url))
else if (process.env.CI)
  describe('proof of delivery on PostgreSQL', () => {
    it('is reachable (required in CI)', () => {
      throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)
    })
  })
else console.warn(`Skipping proof of delivery on PostgreSQL: ${reasons.join('; ')}`)
