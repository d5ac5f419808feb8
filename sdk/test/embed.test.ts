import { createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiError, createRxtraceClient } from '@rxtrace/sdk'
import { ADMIN, listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

/** A port free now, so the service's ISSUER (the base of the URLs it signs) can name it. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

describe('embed URLs', () => {
  let api: TestApi
  let baseUrl: string
  beforeAll(async () => {
    const port = await freePort()
    ;({ api, baseUrl } = await listeningService({ PORT: String(port), ISSUER: `http://127.0.0.1:${port}` }))
  })
  afterAll(() => api?.stop())

  it("asks the service for a signed URL that serves the fleet's dashboard page, and throws the problem when refused", async () => {
    const rx = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const { data: fleet } = await rx.api.POST('/v1/fleets', {
      body: {
        name: 'Speedy Couriers',
        branding: { display_name: 'Speedy', primary_color: '#0a7d5a' },
        embed_origins: ['https://dispatch.speedy.example.com'],
      },
    })
    const before = Date.now()
    const session = await rx.embedUrl(fleet!.id, 120)
    expect(session.url.startsWith(`${baseUrl}/embed/dashboard?token=`)).toBe(true)
    expect(Date.parse(session.expires_at) - before).toBeGreaterThan(100_000)
    expect(Date.parse(session.expires_at) - before).toBeLessThanOrEqual(121_000)

    // The URL alone (no access token) serves the fleet's branded page, framable only by its origins.
    const page = await fetch(session.url)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    expect(page.headers.get('content-security-policy')).toContain('frame-ancestors https://dispatch.speedy.example.com')
    expect(await page.text()).toContain('Speedy')
    const data = await fetch(session.url.replace('/embed/dashboard?', '/embed/dashboard/data?'))
    expect(data.status).toBe(200)

    const refused = await rx.embedUrl('fl_01jd0000000000000000000000', 120).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(ApiError)
    expect(refused).toMatchObject({ status: 404, problem: { code: 'not_found' } })
    await expect(rx.embedUrl(fleet!.id, 6000)).rejects.toMatchObject({ status: 422 })
  })
})
