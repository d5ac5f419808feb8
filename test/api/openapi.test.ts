import { z } from 'zod'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const

// The parts of the OpenAPI 3.1 document structure (spec.openapis.org/oas/v3.1.0 §4.8) that tools
// depend on; no validator package needed.
const Parameter = z.object({
  name: z.string().min(1),
  in: z.enum(['path', 'query', 'header', 'cookie']),
  required: z.boolean().optional(),
  schema: z.record(z.string(), z.unknown()),
})
const MediaTypes = z.record(z.string().regex(/^[\w.+-]+\/[\w.+-]+$/), z.object({ schema: z.record(z.string(), z.unknown()) }))
const Operation = z.object({
  summary: z.string().optional(),
  operationId: z.string().optional(),
  tags: z.array(z.string()).optional(),
  parameters: z.array(Parameter).optional(),
  requestBody: z.object({ content: MediaTypes, required: z.boolean().optional() }).optional(),
  responses: z
    .record(z.string().regex(/^([1-5]XX|[1-5]\d\d|default)$/), z.object({ description: z.string(), content: MediaTypes.optional() }))
    .refine((r) => Object.keys(r).length > 0, 'an operation needs at least one response'),
  security: z.array(z.record(z.string(), z.array(z.string()))).optional(),
})
const Document = z.object({
  openapi: z.string().regex(/^3\.1\.\d+$/),
  info: z.object({ title: z.string().min(1), version: z.string().min(1) }),
  servers: z.array(z.object({ url: z.string() })).optional(),
  paths: z.record(z.string().regex(/^\//), z.object(Object.fromEntries(METHODS.map((m) => [m, Operation.optional()])))),
  components: z
    .object({
      schemas: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
      securitySchemes: z.record(z.string(), z.object({ type: z.string() })).optional(),
    })
    .optional(),
})

/** Every `$ref` in the document, with where it was found. */
function refsOf(value: unknown, at = '#'): { ref: string; at: string }[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => refsOf(v, `${at}/${i}`))
  if (value === null || typeof value !== 'object') return []
  return Object.entries(value).flatMap(([key, v]) =>
    key === '$ref' && typeof v === 'string' ? [{ ref: v, at }] : refsOf(v, `${at}/${key}`),
  )
}

function resolve(doc: unknown, ref: string): unknown {
  return ref
    .slice(2)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (node && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined), doc)
}

/** Every key named `name` anywhere in the document. */
function keysNamed(value: unknown, name: string, at = '#'): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => keysNamed(v, name, `${at}/${i}`))
  if (value === null || typeof value !== 'object') return []
  return Object.entries(value).flatMap(([key, v]) => [...(key === name ? [at] : []), ...keysNamed(v, name, `${at}/${key}`)])
}

describe('the OpenAPI document', () => {
  let api: TestApi
  let doc: z.infer<typeof Document>
  beforeAll(async () => {
    api = await startTestService()
    const res = await api.request('GET', '/v1/openapi.json') // no token
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    doc = res.body
  })
  afterAll(() => api.stop())

  it('is a structurally valid OpenAPI 3.1 document', () => {
    const parsed = Document.safeParse(doc)
    expect(parsed.success, JSON.stringify(parsed.error?.issues.slice(0, 5), null, 1)).toBe(true)
    expect(doc.openapi).toMatch(/^3\.1\./)
    expect(doc.servers).toEqual([{ url: 'http://rxtrace.test' }])
  })

  it('resolves every $ref', () => {
    const unresolved = refsOf(doc).filter(({ ref }) => !ref.startsWith('#/') || resolve(doc, ref) === undefined)
    expect(unresolved).toEqual([])
  })

  it('uses 3.1 schemas (type arrays), not the 3.0 "nullable" keyword', () => {
    expect(keysNamed(doc.components?.schemas, 'nullable')).toEqual([])
    expect(keysNamed(doc.paths, 'nullable')).toEqual([])
  })

  it('declares each path template parameter, required, and no others', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort()
      for (const method of METHODS) {
        const op = item[method]
        if (!op) continue
        const declared = (op.parameters ?? []).filter((p) => p.in === 'path')
        expect(declared.map((p) => p.name).sort(), `${method} ${path}`).toEqual(templated)
        for (const p of declared) expect(p.required, `${method} ${path} {${p.name}}`).toBe(true)
      }
    }
  })

  it('gives operations unique operationIds where it gives them, and only declared security schemes', () => {
    const ops = Object.values(doc.paths).flatMap((item) => METHODS.map((m) => item[m]).filter((op) => op !== undefined))
    const ids = ops.map((op) => op.operationId).filter(Boolean)
    expect(new Set(ids).size).toBe(ids.length)
    const schemes = Object.keys(doc.components?.securitySchemes ?? {})
    for (const op of ops)
      for (const requirement of op.security ?? []) for (const name of Object.keys(requirement)) expect(schemes).toContain(name)
  })

  it('lists every route the app serves under /v1, /oauth and /.well-known', () => {
    const served = api.service.app.routes
      .filter((r) => r.method !== 'ALL' && /^\/(v1|oauth|\.well-known)\//.test(r.path))
      .filter((r) => r.path !== '/v1/openapi.json') // the document does not describe itself
      .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, '{$1}')}`)
    expect(served.length).toBeGreaterThan(20)
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => `${m} ${path}`)),
    )
    expect([...new Set(served)].filter((route) => !documented.has(route))).toEqual([])
  })

  it('documents the bearer scope and the problem answers of every /v1 operation', () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      if (!path.startsWith('/v1/')) continue
      for (const method of METHODS) {
        const op = item[method]
        if (!op) continue
        expect(op.security?.[0]?.bearer, `${method} ${path}`).toEqual([expect.any(String)])
        expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['401', '403', '422']))
        expect(op.responses['401']!.content, `${method} ${path}`).toHaveProperty(['application/problem+json'])
      }
    }
  })

  it('generates the request schemas from the zod validators (e.g. NewPrescription is strict and requires cold_chain)', () => {
    const schema = resolve(doc, '#/components/schemas/NewPrescription') as {
      required: string[]
      additionalProperties: unknown
      properties: Record<string, unknown>
    }
    expect(schema.required).toEqual(expect.arrayContaining(['patient_id', 'cold_chain']))
    expect(schema.additionalProperties).toBe(false)
    expect(schema.properties).toHaveProperty('temperature_profile')
  })
})

describe('the API reference page', () => {
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService()
  })
  afterAll(() => api.stop())

  it('is HTML at /docs whose scripts and styles all load from /docs/assets/', async () => {
    const page = await api.request('GET', '/docs')
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)
    expect(assets.length).toBeGreaterThanOrEqual(3)
    for (const asset of assets) {
      expect(asset, 'no CDN: assets are served locally').toMatch(/^\/docs\/assets\//)
      const res = await api.request('GET', asset)
      expect(res.status, asset).toBe(200)
      expect(res.headers.get('content-type'), asset).toMatch(asset.endsWith('.css') ? /^text\/css/ : /^text\/javascript/)
      expect(res.text.length, asset).toBeGreaterThan(asset.endsWith('init.js') ? 10 : 1_000)
    }
    const init = await api.request('GET', '/docs/assets/init.js')
    expect(init.text).toContain('/v1/openapi.json')
    expect((await api.request('GET', '/docs/assets/nope.js')).status).toBe(404)
  })
})
