export { apiSender, type ApiSenderOptions, type PostingClient } from './api-sender.js'
export { ColdChainBadge } from './ColdChainBadge.js'
export { DeliveryCard } from './DeliveryCard.js'
export { HandoffSignature } from './HandoffSignature.js'
export {
  OfflineQueue,
  type Connectivity,
  type CustodyAction,
  type FailReason,
  type ImageSource,
  type OfflineQueueOptions,
  type QueuedAction,
  type QueuedItem,
  type QueuedUpload,
  type QueueStorage,
  type Sender,
  type SendOutcome,
  type UploadRef,
  failReasons,
  uploadRef,
} from './offline-queue.js'
export { ProofOfDelivery } from './ProofOfDelivery.js'
export {
  deliverBody,
  enqueueDeliver,
  missingProofs,
  type DeliverBody,
  type DocumentType,
  type PodRequirements,
  type Proof,
  type ProofCapture,
} from './proof.js'
export { PatientVerification, type Verification, type VerificationMethod } from './PatientVerification.js'
export { signatureDataUrl, type Stroke } from './signature.js'
