import type { Principal } from '../auth/scopes.js'
import { AppError } from '../errors.js'

/** What an assessment (or its withdrawal) is signed for (the e-signature meanings). */
export type AssessmentSigning = { action: 'assess' | 'withdraw'; deliveryId: string; assessmentId: string; record: Record<string, unknown> }

/**
 * The one place an excursion assessment and its withdrawal get signed (docs/stability.md,
 * Excursion assessments). Until e-signatures land this only checks that a person, not a machine
 * client, is acting, and returns null (no signature stored); the signature module wires in here,
 * checking `signature: {meaning: "assessed", password}` and returning the stored signature.
 */
export async function signAssessment(principal: Principal, _signing: AssessmentSigning): Promise<null> {
  if (!principal.sub.startsWith('us_'))
    throw new AppError('signature_required_person', 'An excursion assessment is a person’s decision: sign in as a pharmacist.')
  return null
}
