import { sqliteStore } from '../helpers/stores.js'
import { describeConcurrency } from './behaviours/concurrency.js'

// The same suite runs on PostgreSQL in test/store/postgres.test.ts.
describeConcurrency(sqliteStore)
