import { sqliteStore } from '../helpers/stores.js'
import { describeSignedDispositions } from './behaviours.js'

describeSignedDispositions(sqliteStore)
