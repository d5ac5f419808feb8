import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres } from '../helpers/stores.js'
import { signedInPerson } from '../helpers/users.js'
import { describeSignedDispositions } from './behaviours.js'

// Signed dispositions on PostgreSQL, and the signing throttle counted by every copy of the service together.
const { url, reasons } = await reachablePostgres()

if (url) {
  describeSignedDispositions(postgresStore(url))

  describe('two copies of the service on one PostgreSQL', () => {
    const schema = `rx_test_${randomBytes(6).toString('hex')}`
    const copies: TestApi[] = []
    afterAll(async () => {
      for (const copy of copies) await copy.stop()
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      await client.query(`drop schema if exists "${schema}" cascade`)
      await client.end()
    })

    it('count wrong signing passwords together: failures on one copy throttle the other', async () => {
      const start = () => startTestService({ PASSWORD_SCRYPT_LOG2_N: '10' }, { store: { kind: 'postgres', url, schema } })
      copies.push(await start())
      copies.push(await start())
      const [one, two] = copies as [TestApi, TestApi]
      const admin = await one.adminToken()
      const pharmacy = await one.pharmacy(admin)
      const person = await signedInPerson(one, admin, { role: 'pharmacist', pharmacy_id: pharmacy.id })
      const rx = await one.prescription(admin, { pharmacy_id: pharmacy.id })
      const sign = (copy: TestApi, password: string) =>
        copy.post(`/v1/deliveries/${rx.delivery_id}/disposition`, person.token, {
          decision: 'release',
          note: 'ok',
          signature: { meaning: 'released', password },
        })
      for (let i = 0; i < 5; i++) expect((await sign(one, 'a wrong password, again')).body.code).toBe('signature_failed')
      const elsewhere = await sign(two, person.password)
      expect(elsewhere.status).toBe(429)
    })
  })
} else if (process.env.CI) {
  describe('signed dispositions on PostgreSQL', () => {
    it('is reachable (required in CI)', () => {
      throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)
    })
  })
} else {
  console.warn(`Skipping the PostgreSQL signature suites: ${reasons.join('; ')}`)
  describe.skipIf(true)('signed dispositions on PostgreSQL (unreachable)', () => {
    it('runs', () => {})
  })
}
