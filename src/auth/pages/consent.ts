import type { Context } from 'hono'
import { scopeWords } from '../roles.js'
import { escapeHtml, hiddenFields, page } from './layout.js'

/** The consent page of a client not marked first-party: whose app it is and what it could do, in plain words. */
export function consentPage(
  c: Context,
  {
    appName,
    tenant,
    userName,
    scopes,
    params,
    csrf,
    returnTo,
  }: {
    appName: string
    /** The pharmacy or fleet the app is restricted to; null when it is not. */
    tenant: { kind: 'pharmacy' | 'fleet'; name: string } | null
    userName: string
    scopes: string[]
    params: Record<string, string | undefined>
    csrf: string
    returnTo: string
  },
): Response {
  const items = scopes.map((s) => `<li>${escapeHtml(scopeWords[s] ?? s)}</li>`).join('\n')
  return page(
    c,
    'Allow access?',
    `<h1>Allow ${escapeHtml(appName)}?</h1>
<p>${
      tenant
        ? `${escapeHtml(appName)} is registered for ${escapeHtml(tenant.name)} only (a ${tenant.kind}).`
        : `${escapeHtml(appName)} is not restricted to one pharmacy or fleet.`
    }</p>
<p>Signed in as <strong>${escapeHtml(userName)}</strong>. <strong>${escapeHtml(appName)}</strong> would be able to:</p>
<ul>
${items || '<li>Nothing beyond knowing who you are</li>'}
</ul>
<form method="post" action="/oauth/authorize">
${hiddenFields({ ...params, csrf_token: csrf, step: 'consent' })}
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>`,
    200,
    [returnTo],
  )
}
