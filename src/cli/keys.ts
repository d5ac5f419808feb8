import { KeyRing } from '../auth/keys.js'
import { rewrapSecrets } from '../store/sealed-secrets.js'
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
    const keys = new KeyRing(db, await ctx.secrets(), ctx.clock, ctx.config.TOKEN_TTL_S)
    await keys.load()
    const rotated = await keys.rotate(aheadS)
    ctx.note(`New key ${rotated.kid} is published within 30 s and signs from ${rotated.activates_at}.`)
    return rotated
  },
}

export const rewrapKeys: Command = {
  name: 'keys rewrap',
  synopsis: 'keys rewrap',
  summary: 'Seal every stored secret under the current key-encryption key (SECRETS_KEY), so the previous one can be retired',
  help: [
    'Run with SECRETS_KEY set to the new key and SECRETS_KEY_PREVIOUS to the old one (or the new key first in',
    'SECRETS_KEY_FILE), once every copy of the service holds both: docs/operations.md, Rotating the key-encryption key.',
    'Safe while the service runs; `remaining` must be 0 before the old key is removed.',
  ],
  options: {},
  positionals: [],
  async run(ctx) {
    const secrets = await ctx.secrets()
    const { db } = await ctx.store()
    const first = await rewrapSecrets(db, secrets)
    // A value another process replaced meanwhile (a webhook secret rotated) is looked at again.
    const second = first.skipped > 0 ? await rewrapSecrets(db, secrets) : { sealed: 0, skipped: 0 }
    const remaining = second.skipped
    ctx.note(
      remaining === 0
        ? `Every secret is sealed under key ${secrets.currentKeyId}; the other keys may be removed from every copy.`
        : `${remaining} secrets changed while being rewrapped; run it again.`,
    )
    return { key_id: secrets.currentKeyId, rewrapped: first.sealed + second.sealed, already_current: first.current, remaining }
  },
}
