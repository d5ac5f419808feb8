// Public API of the cold-chain rules (rules/README.md). Pure: no I/O beyond loading the built-in
// profiles at import, no clock — time is always passed in.
export {
  builtInProfiles,
  CUSTOM_PROFILE_DEFAULTS,
  isBuiltInProfileName,
  ProfileError,
  resolveProfile,
  type BuiltInProfileName,
  type CustomProfileInput,
  type TemperatureProfile,
} from './profile.js'
export { temperatureProfileSchema } from './temperature-profile.js'
export { customProfileSchema, type CustomProfile } from './profile-schema.js'
export { addToMkt, DELTA_H_OVER_R_K, emptyMktSums, meanKineticTemperature, MktAccumulator, mktOf, type MktSums } from './mkt.js'
export { initialColdChain, type ClosedExcursion, type ColdChainState, type OpenInterval } from './state.js'
export { evaluate, replay, type Reading } from './engine.js'
export { MKT_MIN_COVERAGE_S } from './breaks.js'
export { checkSilence } from './silence.js'
export { beyondHardLimit, breakOnArrival } from './hard-limit.js'
export { reconcile, recompute } from './late.js'
export { coldChainSummarySchema, excursionSummarySchema, summarize, type ColdChainSummary, type ExcursionSummary } from './summary.js'
export { ReorderBuffer, type PushResult } from './reorder.js'
export { breakReasons, excursionKinds, exhaustedReasons } from './events.js'
export type {
  BreakReason,
  BreakThreshold,
  BudgetLowEvent,
  BudgetLowEventData,
  ExhaustedItem,
  ExhaustedReason,
  ColdChainBreakData,
  ColdChainBreakEvent,
  ExcursionEvent,
  ExcursionEventData,
  ExcursionKind,
  RecoveredEvent,
  RecoveredEventData,
  RuleEvent,
  SensorOfflineEvent,
  SensorOfflineEventData,
} from './events.js'
export {
  MAX_BUDGET_BANDS,
  type AddBack,
  type BudgetBand,
  type ItemStability,
  type ProductStability,
  type TemperatureRange,
} from './stability.js'
export {
  chargeReadings,
  nextLeg,
  openLedger,
  replayLedger,
  startLedger,
  type ItemExhaustedEvent,
  type ItemLedger,
  type StabilityEvent,
  type StabilityLedger,
  type StabilityPlan,
} from './stability-ledger.js'
export { stabilitySummarySchema, summarizeStability, type StabilitySummary } from './stability-summary.js'
export { productStabilitySchema } from './stability-schema.js'
export {
  alarmKinds,
  alarmStates,
  applyAlarmEvent,
  escalationDue,
  isAcknowledged,
  raisedAlarm,
  type AlarmEvent,
  type AlarmKind,
  type AlarmLifecycle,
  type AlarmState,
} from './alarm-lifecycle.js'
