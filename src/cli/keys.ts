import { KeyRing } from '../auth/keys.js'
import type { Command } from './command.js'
import { durationSeconds } from './usage.js'

// GET /.well-known/jwks.json is served with Cache-Control max-age=300: a verifier that cached the
// key set just before the rotation sees the new key before it signs anything after 5 minutes
// (running instances re-read the key set every 30 s, well inside that).
const DEFAULT_PUBLISH_AHEAD = '5m'
const MAX_PUBLISH_AHEAD_S = 86_400 // as POST /v1/oauth/signing-keys/rotate

export const rotateKeys: Command = {
  name: 'keys rotate',
  synopsis: 'keys rotate [--publish-ahead 5m]',
  summary: 'Add a new ES256 signing key; the current ones retire once their tokens have expired',
  help: [
    '--publish-ahead D    the new key is published in the JWKS now and signs after D (default 5m,',
    '                     the JWKS cache lifetime; 0s signs at once), at most 24h',
    'Running instances re-read the key set within 30 s, so they publish the new key well before it signs.',
  ],
  options: { 'publish-ahead': { type: 'string' } },
  positionals: [],
  async run(ctx, values) {
    const aheadS = durationSeconds(
      'publish-ahead',
      (values['publish-ahead'] as string | undefined) ?? DEFAULT_PUBLISH_AHEAD,
      MAX_PUBLISH_AHEAD_S,
    )
    const { db } = await ctx.store()
    const keys = new KeyRing(db, ctx.clock, ctx.config.TOKEN_TTL_S)
    await keys.load()
    const rotated = await keys.rotate(aheadS)
    ctx.note(`New key ${rotated.kid} is published within 30 s and signs from ${rotated.activates_at}.`)
    return rotated
  },
}
