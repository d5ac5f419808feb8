import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browser, pkce } from '../helpers/browser.js'
import { HOUR, MINUTE, testClock } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'
import { REDIRECT, signIn, signInWorld } from './signin-fixtures.js'

// A new user's password-setup link works once, for 72 hours (docs/api.md, Users): a link found in
// an old mailbox, or forwarded, is worthless once that time has passed.

describe('the password-setup link', () => {
  const clock = testClock()
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  beforeAll(async () => {
    world = await signInWorld({}, { clock })
    api = world.api
  })
  afterAll(() => api.stop())

  /** A new technician without a password; the path and query of their setup link. */
  async function newUser(email: string) {
    const created = await api.post('/v1/users', await api.adminToken(), {
      email,
      name: 'Terry Tech',
      role: 'technician',
      pharmacy_id: world.pharmacy.id,
    })
    expect(created.status, created.text).toBe(201)
    const link = new URL(created.body.setup_url)
    return { link: link.pathname + link.search, token: link.searchParams.get('token')! }
  }

  const setPassword = (token: string, password: string) =>
    browser(api.service).post('/account/setup', { token, password, confirm: password })

  const canSignIn = async (email: string, password: string) => {
    const done = await signIn(
      browser(api.service),
      { client_id: world.client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge },
      email,
      password,
    )
    return done.status === 303
  }

  it('still works just before 72 hours', async () => {
    const { link, token } = await newUser('early@example.com')
    clock.advance(72 * HOUR - MINUTE)
    expect((await browser(api.service).get(link)).status).toBe(200)
    expect((await setPassword(token, 'set in the nick of time')).status).toBe(200)
    expect(await canSignIn('early@example.com', 'set in the nick of time')).toBe(true)
  })

  it('is refused after 72 hours, on the page and on the form post, and sets no password', async () => {
    const { link, token } = await newUser('late@example.com')
    const page = await browser(api.service).get(link)
    expect(page.status).toBe(200) // opened in time…
    clock.advance(72 * HOUR + MINUTE) // …submitted too late
    const posted = await setPassword(token, 'three days too late')
    expect(posted.status).toBe(404)
    expect(posted.text).toContain('has expired')
    const reopened = await browser(api.service).get(link)
    expect(reopened.status).toBe(404)
    expect(reopened.text).not.toContain('Choose a password')
    expect(await canSignIn('late@example.com', 'three days too late')).toBe(false)
  })
})
