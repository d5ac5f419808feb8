import { sqliteStore } from '../helpers/stores.js'
import { describeDeliveryStates } from './behaviours/delivery-states.js'

// The same suite runs on PostgreSQL in test/store/postgres.test.ts.
describeDeliveryStates(sqliteStore)
