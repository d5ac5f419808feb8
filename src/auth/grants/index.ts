import { authorizationCode } from './authorization-code.js'
import { clientCredentials } from './client-credentials.js'
import { refreshToken } from './refresh-token.js'
import type { Grant } from './types.js'

export type { Grant, GrantContext, TokenAnswer, TokenParams } from './types.js'

/** The grant types the token endpoint serves, by name; a custom grant would be registered the same way. */
export const grants: ReadonlyMap<string, Grant> = new Map([clientCredentials, authorizationCode, refreshToken].map((g) => [g.grantType, g]))
