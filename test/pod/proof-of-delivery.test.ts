import { sqliteStore } from '../helpers/stores.js'
import { describeProofOfDelivery } from './behaviours.js'

describeProofOfDelivery(sqliteStore)
