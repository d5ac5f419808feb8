export { createRxtraceClient, type DeprecationNotice, type Event, type RxtraceClient, type RxtraceClientOptions } from './client.js'
export { createEmbedUrl, type EmbedSession } from './embed.js'
export {
  checkStatement,
  getRateCard,
  getReconciliation,
  getReconciliationCsv,
  type Period,
  type RateCard,
  type Reconciliation,
  type ReconciliationLine,
  type StatementComparison,
  type StatementLine,
} from './fleet-money.js'
export { FeedError, subscribeExceptions, type ExceptionFeedOptions, type FeedEvent } from './exceptions.js'
export { ApiError, paginate, type PagedPath, type PageItem, type PageQuery } from './pages.js'
export {
  beginSignIn,
  completeSignIn,
  createPkcePair,
  refreshSignIn,
  signedInTokens,
  SignInError,
  type SignInClient,
  type Tokens,
} from './pkce.js'
export type { components, operations, paths, webhooks } from './schema.js'
export { ClientCredentials, staticToken, TokenRequestError, type ClientCredentialsOptions, type TokenSource } from './tokens.js'
export {
  verifyWebhook,
  WebhookVerificationError,
  type VerifyWebhookOptions,
  type WebhookKeySet,
  type WebhookPublicKey,
} from './webhooks.js'
