export { apiSender, type PostingClient } from './api-sender.js'
export { ColdChainBadge } from './ColdChainBadge.js'
export { DeliveryCard } from './DeliveryCard.js'
export { HandoffSignature } from './HandoffSignature.js'
export {
  OfflineQueue,
  type Connectivity,
  type CustodyAction,
  type OfflineQueueOptions,
  type QueuedAction,
  type QueueStorage,
  type Sender,
  type SendOutcome,
} from './offline-queue.js'
export { PatientVerification, type Verification, type VerificationMethod } from './PatientVerification.js'
export { signatureDataUrl, type Stroke } from './signature.js'
