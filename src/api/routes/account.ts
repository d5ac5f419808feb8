import { OpenAPIHono } from '@hono/zod-openapi'
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from '../../auth/passwords.js'
import { escapeHtml, hiddenFields, page } from '../../auth/pages/layout.js'
import { messagePage } from '../../auth/pages/message.js'
import { passwordProblem } from '../../auth/password-policy.js'
import type { People } from '../../auth/people.js'
import type { AppEnv } from '../env.js'
import { bodySizeLimit } from '../middleware/body-guard.js'
import { formNulGuard } from '../middleware/nul-guard.js'

/**
 * The single-use password-setup link a new user receives (72 h). The link's token is its own
 * proof: 256 random bits that no other site can know, so the form needs no separate CSRF token.
 */
export function accountRoutes({ people }: { people: People }) {
  const app = new OpenAPIHono<AppEnv>()
  app.use('/account/*', bodySizeLimit(), formNulGuard())

  const form = (c: Parameters<typeof page>[0], token: string, name: string, error?: string) =>
    page(
      c,
      'Choose a password',
      `<h1>Choose a password</h1>
<p>Welcome, ${escapeHtml(name)}. Choose a password of at least ${MIN_PASSWORD_LENGTH} characters: a few unrelated words work well. Common passwords, and ones containing your email’s name or the service’s name, are refused.</p>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/account/setup">
${hiddenFields({ token })}
<label for="password">New password</label>
<input id="password" name="password" type="password" autocomplete="new-password" minlength="${MIN_PASSWORD_LENGTH}" maxlength="${MAX_PASSWORD_LENGTH}" required>
<label for="confirm">The same again</label>
<input id="confirm" name="confirm" type="password" autocomplete="new-password" required>
<button type="submit">Set password</button>
</form>`,
      error ? 400 : 200,
    )

  const expired = (c: Parameters<typeof page>[0]) =>
    messagePage(
      c,
      'Link not valid',
      'This setup link was used already, has expired, or is not one we sent. Ask your administrator for a new one.',
      404,
    )

  app.get('/account/setup', async (c) => {
    const token = c.req.query('token') ?? ''
    const user = await people.users.setupTokenUser(token)
    return user ? form(c, token, user.name) : expired(c)
  })

  app.post('/account/setup', async (c) => {
    const body = await c.req.parseBody()
    const token = typeof body.token === 'string' ? body.token : ''
    const password = typeof body.password === 'string' ? body.password : ''
    const user = await people.users.setupTokenUser(token)
    if (!user) return expired(c)
    const problem = await passwordProblem(password, user)
    if (problem) return form(c, token, user.name, `The password ${problem}. Choose another.`)
    if (password !== body.confirm) return form(c, token, user.name, 'The two passwords differ.')
    if (!(await people.users.setPasswordWithToken(token, password))) return expired(c)
    return messagePage(c, 'Password set', 'Your password is set. Go back to the app and sign in.', 200)
  })
  return app
}
