import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browser, pkce } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { REDIRECT, signIn, signInWorld, tokenRequest } from './signin-fixtures.js'

/** Signs `email` in through the first-party client; returns its tokens. */
async function userTokens(api: TestApi, clientId: string, email: string, password: string) {
  const b = browser(api.service)
  const { verifier, challenge } = pkce()
  const done = await signIn(b, { client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge }, email, password)
  expect(done.status).toBe(303)
  const res = await tokenRequest(api, {
    grant_type: 'authorization_code',
    code: done.location!.searchParams.get('code')!,
    redirect_uri: REDIRECT,
    code_verifier: verifier,
    client_id: clientId,
  })
  expect(res.status).toBe(200)
  return { ...res.body, browser: b } as { access_token: string; refresh_token: string; browser: ReturnType<typeof browser> }
}

describe('users', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
  })
  afterAll(() => api.stop())

  it('are created with a role fixed to a tenant; with no password, a single-use setup link', async () => {
    expect(world.user).toMatchObject({
      email: 'pat@example.com',
      role: 'pharmacist',
      pharmacy_id: world.pharmacy.id,
      fleet_id: null,
      disabled: false,
    })
    expect(world.user.id).toMatch(/^us_/)
    expect(world.user.password).toBeUndefined()
    const created = await api.post('/v1/users', world.admin, {
      email: 'terry@example.com',
      name: 'Terry Tech',
      role: 'technician',
      pharmacy_id: world.pharmacy.id,
    })
    expect(created.status).toBe(201)
    const link = new URL(created.body.setup_url)
    const b = browser(api.service)
    const form = await b.get(link.pathname + link.search)
    expect(form.status).toBe(200)
    expect(form.text).toContain('Terry Tech')
    expect(form.headers.get('cache-control')).toBe('no-store')
    expect((await b.post('/account/setup', { token: form.form.token!, password: 'short', confirm: 'short' })).status).toBe(400)
    expect(
      (
        await b.post('/account/setup', {
          token: form.form.token!,
          password: 'a long enough passphrase',
          confirm: 'a long enough passphrase',
        })
      ).status,
    ).toBe(200)
    expect((await b.get(link.pathname + link.search)).status).toBe(404) // single use
    expect(
      (await b.post('/account/setup', { token: form.form.token!, password: 'another passphrase!', confirm: 'another passphrase!' })).status,
    ).toBe(404)
    const tokens = await userTokens(api, world.client.client_id, 'terry@example.com', 'a long enough passphrase')
    expect(decodeJwt(tokens.access_token).scope).not.toContain('deliveries:write')
  })

  it('are refused in the wrong tenant, with a taken email, or as a driver without a driver', async () => {
    const fleet = (await api.post('/v1/fleets', world.admin, { name: 'Fleet' })).body
    const cases: [Record<string, unknown>, number, string][] = [
      [{ role: 'pharmacist', fleet_id: fleet.id }, 422, '/pharmacy_id'],
      [{ role: 'dispatcher', pharmacy_id: world.pharmacy.id }, 422, '/fleet_id'],
      [{ role: 'driver', fleet_id: fleet.id }, 422, '/driver_id'],
      [{ role: 'admin', pharmacy_id: world.pharmacy.id }, 422, '/role'],
      [{ role: 'pharmacist', pharmacy_id: world.pharmacy.id, email: 'PAT@example.com' }, 409, '/email'],
    ]
    for (const [body, status, pointer] of cases) {
      const res = await api.post('/v1/users', world.admin, { email: `x${Math.random()}@example.com`, name: 'X', ...body })
      expect(res.status).toBe(status)
      expect(res.body.errors[0].pointer).toBe(pointer)
    }
  })

  it('no token creates or changes a user more powerful than itself', async () => {
    const other = await api.pharmacy(world.admin)
    const limited = (
      await api.post('/v1/oauth/clients', world.admin, {
        client_name: 'Pharmacy admin',
        pharmacy_id: world.pharmacy.id,
        scope: 'clients:write pharmacies:read prescriptions:read prescriptions:write deliveries:read custody:write telemetry:read',
      })
    ).body
    const token = await api.tokenFor(limited.client_id, limited.client_secret)
    const pharmacist = await api.post('/v1/users', token, {
      email: 'p2@example.com',
      name: 'P',
      role: 'pharmacist',
      pharmacy_id: world.pharmacy.id,
    })
    expect(pharmacist.status).toBe(422) // cold-chain:disposition and more are beyond this token
    const elsewhere = await api.post('/v1/users', token, { email: 't2@example.com', name: 'T', role: 'technician', pharmacy_id: other.id })
    expect(elsewhere.status).toBe(422)
    const technician = await api.post('/v1/users', token, {
      email: 't3@example.com',
      name: 'T',
      role: 'technician',
      pharmacy_id: world.pharmacy.id,
    })
    expect(technician.status).toBe(201)
    expect((await api.request('PATCH', `/v1/users/${world.user.id}`, { token, body: { name: 'Renamed' } })).status).toBe(422)
    expect((await api.request('PATCH', `/v1/users/${technician.body.id}`, { token, body: { role: 'pharmacist' } })).status).toBe(422)
    // Lists and reads see only the token's tenant.
    const listed = await api.get('/v1/users?limit=100', token)
    expect(listed.body.data.every((u: { pharmacy_id: string }) => u.pharmacy_id === world.pharmacy.id)).toBe(true)
    const page = await api.get('/v1/users?limit=1', world.admin)
    expect(page.body.data).toHaveLength(1)
    expect(page.body.next_cursor).toBeTruthy()
  })

  it('disabling a user ends their session and refresh tokens, and their access tokens stop working', async () => {
    const created = (
      await api.post('/v1/users', world.admin, {
        email: 'dana@example.com',
        name: 'Dana',
        role: 'pharmacist',
        pharmacy_id: world.pharmacy.id,
        password: 'her own long pass phrase',
      })
    ).body
    const tokens = await userTokens(api, world.client.client_id, 'dana@example.com', 'her own long pass phrase')
    expect((await api.get('/v1/deliveries', tokens.access_token)).status).toBe(200)
    const disabled = await api.request('PATCH', `/v1/users/${created.id}`, { token: world.admin, body: { disabled: true } })
    expect(disabled).toMatchObject({ status: 200, body: { disabled: true } })
    const refused = await api.get('/v1/deliveries', tokens.access_token)
    expect(refused.status).toBe(401)
    expect(refused.headers.get('www-authenticate')).toContain('invalid_token')
    expect(
      (await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: world.client.client_id }))
        .body.error,
    ).toBe('invalid_grant')
    expect(await api.service.people.sessions.resume(tokens.browser.jar.get('rxtrace_session'))).toBeNull()
    // And they cannot sign in again: the same generic failure as a wrong password.
    const again = await signIn(
      browser(api.service, '198.51.100.77'),
      { client_id: world.client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge },
      'dana@example.com',
      'her own long pass phrase',
    )
    expect(again.status).toBe(401)
  })
})

describe('custody with user tokens', () => {
  it('records the user in actor.sub; us_ parties must be active users of the delivery’s pharmacy or fleet; a driver sees only their deliveries', async () => {
    const world = await signInWorld()
    const { api, admin } = world
    try {
      const { fleetId, driverId, driver2Id } = await api.fleetWithDriver(admin)
      const other = await api.pharmacy(admin)
      const outsider = (
        await api.post('/v1/users', admin, {
          email: 'o@example.com',
          name: 'O',
          role: 'technician',
          pharmacy_id: other.id,
          password: 'outsider long password',
        })
      ).body
      const tech = (
        await api.post('/v1/users', admin, {
          email: 'tech@example.com',
          name: 'Tech',
          role: 'technician',
          pharmacy_id: world.pharmacy.id,
          password: 'tech long password!',
        })
      ).body
      const rx = await api.prescription(admin, { pharmacy_id: world.pharmacy.id })
      const rx2 = await api.prescription(admin, { pharmacy_id: world.pharmacy.id })
      await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })
      await api.post(`/v1/deliveries/${rx2.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driver2Id })

      const { access_token: token } = await userTokens(api, world.client.client_id, 'pat@example.com', 'correct horse battery staple')
      const pickup = (from: string) => api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, token, { from, to: driverId, signature: 'sig' })
      for (const from of [outsider.id, 'us_01jd0000000000000000000000']) {
        const res = await pickup(from)
        expect(res.status).toBe(422)
        expect(res.body.errors[0].pointer).toBe('/from')
      }
      await api.request('PATCH', `/v1/users/${tech.id}`, { token: admin, body: { disabled: true } })
      expect((await pickup(tech.id)).status).toBe(422)
      const done = await pickup(world.user.id)
      expect(done.status).toBe(200)
      expect(done.body.custody.at(-1)).toMatchObject({
        type: 'picked_up',
        from: world.user.id,
        actor: { client_id: world.client.client_id, sub: world.user.id },
      })

      const driverUser = await api.post('/v1/users', admin, {
        email: 'drv@example.com',
        name: 'Driver',
        role: 'driver',
        fleet_id: fleetId,
        driver_id: driverId,
        password: 'driver long password',
      })
      expect(driverUser.status).toBe(201)
      const { access_token: driverToken } = await userTokens(api, world.client.client_id, 'drv@example.com', 'driver long password')
      expect(decodeJwt(driverToken).fleet_id).toBe(fleetId)
      const seen = await api.get('/v1/deliveries', driverToken)
      expect(seen.body.data.map((d: { id: string }) => d.id)).toEqual([rx.delivery_id])
      expect((await api.get(`/v1/deliveries/${rx2.delivery_id}`, driverToken)).status).toBe(404)
    } finally {
      await api.stop()
    }
  })
})
