import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

const ISSUER = 'http://rxtrace.test'

describe('discovery of people’s sign-in', () => {
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService({ PASSWORD_SCRYPT_LOG2_N: '10' })
  })
  afterAll(() => api.stop())

  it('RFC 8414 metadata advertises the authorization endpoint, every grant, S256 only, iss in responses, public clients and logout', async () => {
    const { body } = await api.request('GET', '/.well-known/oauth-authorization-server')
    expect(body).toMatchObject({
      authorization_endpoint: `${ISSUER}/oauth/authorize`,
      end_session_endpoint: `${ISSUER}/oauth/logout`,
      revocation_endpoint: `${ISSUER}/oauth/revoke`,
      introspection_endpoint: `${ISSUER}/oauth/introspect`,
      grant_types_supported: ['client_credentials', 'authorization_code', 'refresh_token'],
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    })
  })

  it('the OpenAPI document describes users, the authorize endpoint, logout and the new client fields', async () => {
    const { body: doc } = await api.request('GET', '/v1/openapi.json')
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/users', '/v1/users/{id}', '/oauth/authorize', '/oauth/logout']))
    expect(Object.keys(doc.paths['/v1/users/{id}'])).toEqual(expect.arrayContaining(['get', 'patch']))
    expect(doc.components.schemas.NewClient.properties).toHaveProperty('first_party')
    expect(doc.components.schemas.NewClient.properties.token_endpoint_auth_method.enum).toContain('none')
    expect(doc.components.schemas.NewUser.properties.role.enum).toEqual([
      'pharmacist',
      'technician',
      'dispatcher',
      'driver',
      'fleet_admin',
      'admin',
    ])
    const token = doc.paths['/oauth/token'].post.requestBody.content['application/x-www-form-urlencoded'].schema
    expect(JSON.stringify(token)).toContain('code_verifier')
  })
})
