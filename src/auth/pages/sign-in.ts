import type { Context } from 'hono'
import { escapeHtml, hiddenFields, page } from './layout.js'

/** The sign-in form: email and password, posted back to /oauth/authorize with the request's parameters. */
export function signInPage(
  c: Context,
  {
    appName,
    params,
    csrf,
    email = '',
    error,
    status = 200,
    returnTo,
  }: {
    appName: string
    params: Record<string, string | undefined>
    csrf: string
    email?: string
    error?: string
    status?: 200 | 401 | 429
    /** The redirect URI's origin, where the post may end up (see layout's CSP). */
    returnTo: string
  },
): Response {
  return page(
    c,
    'Sign in',
    `<h1>Sign in</h1>
<p class="app"><strong>${escapeHtml(appName)}</strong> is asking you to sign in to rxtrace.</p>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/oauth/authorize">
${hiddenFields({ ...params, csrf_token: csrf, step: 'sign_in' })}
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${escapeHtml(email)}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`,
    status,
    [returnTo],
  )
}
