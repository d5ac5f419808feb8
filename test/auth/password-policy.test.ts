import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browser } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { signInWorld } from './signin-fixtures.js'

/**
 * New passwords are checked against a list of common and breached passwords and against words
 * an attacker would try first (NIST SP 800-63B §5.1.1.2): the person's email name and the
 * service's name. Refused with a 422 that says why, or on the setup page in words.
 */
describe('choosing a password', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  let n = 0
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
  })
  afterAll(() => api.stop())

  const create = (password: string | undefined, email = `person${++n}@example.com`) =>
    api.post('/v1/users', world.admin, { email, name: 'A Person', role: 'technician', pharmacy_id: world.pharmacy.id, password })

  it.each([
    ['passwordpassword', /common/],
    ['PasswordPassword', /common/],
    ['qwertyuiop123!', /common/],
    ['Password12345678', /common/],
    ['aaaaaaaaaaaaaaaa', /common|repeat/],
    ['I love RxTrace so much', /rxtrace/i],
  ])('refuses %s with a 422 problem that says why', async (password, why) => {
    const res = await create(password)
    expect(res.status).toBe(422)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    expect(res.body.code).toBe('validation_failed')
    expect(res.body.errors).toEqual([{ pointer: '/password', message: expect.stringMatching(why) }])
  })

  it('refuses a password containing the email’s name, and takes an unusual passphrase', async () => {
    const refused = await create('dana.smith was here 2026', 'Dana.Smith@example.com')
    expect(refused.status).toBe(422)
    expect(refused.body.errors).toEqual([{ pointer: '/password', message: expect.stringMatching(/email/) }])
    expect((await create('violet kettle under seven bridges', 'dana.smith@example.com')).status).toBe(201)
  })

  it('the setup page refuses a common password in plain words, then takes a good one', async () => {
    const created = await create(undefined, 'sam.setup@example.com')
    expect(created.status).toBe(201)
    const path = new URL(created.body.setup_url).pathname + new URL(created.body.setup_url).search
    const b = browser(api.service)
    const form = await b.get(path)
    expect(form.status).toBe(200)
    const refused = await b.post('/account/setup', { ...form.form, password: 'passwordpassword', confirm: 'passwordpassword' })
    expect(refused.status).toBe(400)
    expect(refused.text).toMatch(/too common/)
    const namesMe = await b.post('/account/setup', { ...form.form, password: 'sam.setup forever 77', confirm: 'sam.setup forever 77' })
    expect(namesMe.status).toBe(400)
    expect(namesMe.text).toMatch(/email/)
    const done = await b.post('/account/setup', {
      ...form.form,
      password: 'violet kettle under seven bridges',
      confirm: 'violet kettle under seven bridges',
    })
    expect(done.status).toBe(200)
    expect(done.text).toContain('Password set')
  })
})
