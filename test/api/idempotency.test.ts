import { sqliteStore } from '../helpers/stores.js'
import { describeIdempotency } from './behaviours/idempotency.js'

// The same suite runs on PostgreSQL in test/store/postgres.test.ts.
describeIdempotency(sqliteStore)
