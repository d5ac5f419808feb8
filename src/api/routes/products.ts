import { OpenAPIHono } from '@hono/zod-openapi'
import { productStabilitySchema } from '../../../rules/index.js'
import type { SignatureAuthority } from '../../auth/e-signatures.js'
import { storedSignatureSchema } from '../../domain/e-signature.js'
import { validationFailed } from '../../errors.js'
import type { ProductService, StabilityVersion } from '../../services/products.js'
import { SignatureInput } from './deliveries.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { component, idParam, pageOf, pageQuery, problem, v1Route, z } from '../openapi.js'

const stabilityExample = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [
    { min_c: 8, max_c: 25, allowed_s: 1_209_600 },
    { min_c: 25, max_c: 30, allowed_s: 86_400 },
    { min_c: 0, max_c: 2, allowed_s: 3600 },
  ],
  freeze_thaw_max: 0,
  hard_min_c: -0.5,
  hard_max_c: 30,
  source: 'Prescribing information, section 16.2 (storage and handling)',
}
const productExample = {
  id: 'pr_01jd0000000000000000000000',
  ndc: '00002-8215-01',
  name: 'Insulin lispro 100 units/mL, 10 mL vial',
  pharmacy_id: 'ph_01jd0000000000000000000000',
  stability: stabilityExample,
  version: 1,
  effective_from: '2026-11-23T18:00:00.000Z',
  created_at: '2026-11-23T18:00:00.000Z',
}
const versionExample = {
  product_id: productExample.id,
  version: 2,
  stability: stabilityExample,
  effective_from: '2026-12-01T00:00:00.000Z',
  created_at: '2026-11-24T09:00:00.000Z',
  signature: {
    id: 'sg_01jd0000000000000000000000',
    signer: 'us_01jd0000000000000000000000',
    name: 'Pat Pharmacist',
    email: 'pat@example.com',
    meaning: 'approved',
    signed_at: '2026-11-24T09:00:00.000Z',
    record_hash: 'sha256:3f1c9a2b7e4d5c6b8a9f0e1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3',
    method: 'password',
  },
  signature_verified: true,
}

const ProductStability = component(productStabilitySchema, 'ProductStability')
const ndc = z.string().max(20).describe('10 digits as 4-4-2, 5-3-2 or 5-4-1 with dashes, or 11 digits (dashes optional); stored as 5-4-2')

const NewProduct = z
  .strictObject({
    ndc,
    name: z.string().min(1).max(200),
    pharmacy_id: z
      .string()
      .max(64)
      .nullable()
      .optional()
      .describe("Defaults to the token's pharmacy; null (every pharmacy) by an unrestricted client only"),
    stability: ProductStability,
  })
  .openapi('NewProduct', {
    example: { ndc: '0002-8215-01', name: productExample.name, stability: stabilityExample },
  })

const Product = z
  .object({
    id: z.string(),
    ndc: z.string().describe('11 digits, 5-4-2, with dashes'),
    name: z.string(),
    pharmacy_id: z.string().nullable().describe('Null: every pharmacy'),
    stability: ProductStability,
    version: z.number().int().describe('The stability version in force now'),
    effective_from: z.string(),
    created_at: z.string(),
  })
  .openapi('Product', { example: productExample })

const NewStabilityVersion = z
  .strictObject({
    stability: ProductStability,
    effective_from: z.iso
      .datetime({ offset: true })
      .optional()
      .describe('When the version comes into force (RFC 3339, now or later); defaults to now'),
    version: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('The version this one follows; if given it must be the latest (versions are never edited)'),
    signature: SignatureInput.optional().describe(
      'Required when a person adds the version: their e-signature, meaning `approved` (docs/part11.md); a machine client cannot sign and adds unsigned versions',
    ),
  })
  .openapi('NewStabilityVersion', { example: { stability: stabilityExample, version: 1 } })

const StabilityVersion = z
  .object({
    product_id: z.string(),
    version: z.number().int().describe('1, 2, …: each PUT adds one; versions are never edited'),
    stability: ProductStability,
    effective_from: z.string(),
    created_at: z.string(),
    signature: storedSignatureSchema.nullable().describe('The approving person’s e-signature; null when a machine client added it'),
    signature_verified: z
      .boolean()
      .nullable()
      .describe("Whether the signature's record_hash is this version's own content (recomputed on every read); null without a signature"),
  })
  .openapi('StabilityVersion', { example: versionExample })

const ProductPage = pageOf(Product).openapi('ProductPage', { example: { data: [productExample], next_cursor: null } })
const StabilityVersionPage = pageOf(StabilityVersion).openapi('StabilityVersionPage', {
  example: { data: [versionExample], next_cursor: null },
})

/** `/v1/products`: products by NDC with versioned stability data (docs/stability.md). */
export function productRoutes(products: ProductService, signatures: SignatureAuthority) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('products:write', {
      method: 'post',
      path: '/v1/products',
      tags: ['Products'],
      operationId: 'createProduct',
      summary: 'Register a product and its stability data (version 1)',
      description:
        "A pharmacy token registers its own products; an unrestricted client names the pharmacy or null for every pharmacy. Another pharmacy's id answers 404; one product per NDC and owner (409).",
      request: { body: { content: { 'application/json': { schema: NewProduct } }, required: true } },
      responses: {
        201: { description: 'The product', content: { 'application/json': { schema: Product, example: productExample } } },
      },
    }),
    async (c) => c.json(await products.create(c.get('principal'), c.req.valid('json')), 201),
  )

  app.openapi(
    v1Route('prescriptions:read', {
      method: 'get',
      path: '/v1/products',
      tags: ['Products'],
      operationId: 'listProducts',
      summary: 'Products the token can see, by NDC',
      description: "A pharmacy sees its own products and every pharmacy's; `ndc` in any accepted shape.",
      request: { query: pageQuery.extend({ ndc: ndc.optional() }) },
      responses: {
        200: {
          description: 'A page of products',
          content: { 'application/json': { schema: ProductPage, example: { data: [productExample], next_cursor: null } } },
        },
      },
    }),
    async (c) => c.json(await products.list(c.get('principal'), c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('prescriptions:read', {
      method: 'get',
      path: '/v1/products/{id}',
      tags: ['Products'],
      operationId: 'getProduct',
      summary: 'A product with the stability version in force now',
      request: { params: idParam('pr') },
      responses: {
        200: { description: 'The product', content: { 'application/json': { schema: Product, example: productExample } } },
      },
    }),
    async (c) => c.json(await products.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('products:write', {
      method: 'put',
      path: '/v1/products/{id}/stability',
      tags: ['Products'],
      operationId: 'putProductStability',
      summary: 'Add a stability version',
      description:
        'Adds the next version; none is ever edited. A prescription item is judged by the version in force when the prescription was created.',
      request: { params: idParam('pr'), body: { content: { 'application/json': { schema: NewStabilityVersion } }, required: true } },
      responses: {
        201: { description: 'The new version', content: { 'application/json': { schema: StabilityVersion, example: versionExample } } },
        401: problem(
          '`signature_failed` (wrong password: nothing changed), `insufficient_user_authentication` (RFC 9470 step-up), or `unauthorized`',
        ),
        403: problem('`signature_required_person` (a machine client cannot sign) or `insufficient_scope`'),
      },
    }),
    async (c) => {
      const principal = c.get('principal')
      const { id } = c.req.valid('param')
      const { signature, ...body } = c.req.valid('json')
      await products.get(principal, id) // 404 before any password is tried
      if (signature === undefined && principal.sub.startsWith('us_'))
        throw validationFailed([{ pointer: '/signature', message: 'a person signs the stability versions they add (meaning "approved")' }])
      const signer = signature && (await signatures.authenticate(principal, signature, 'approved'))
      // The version's signature is its own audit record, committed with the version (docs/part11.md).
      const record = answerInTransaction<StabilityVersion>(c, 201, [], (version) => version.signature)
      return c.json(await products.putStability(principal, id, body, record, signer || undefined), 201)
    },
  )

  app.openapi(
    v1Route('prescriptions:read', {
      method: 'get',
      path: '/v1/products/{id}/stability/versions',
      tags: ['Products'],
      operationId: 'listProductStabilityVersions',
      summary: "Every version of the product's stability data, oldest first",
      request: { params: idParam('pr'), query: pageQuery },
      responses: {
        200: {
          description: 'A page of versions',
          content: { 'application/json': { schema: StabilityVersionPage, example: { data: [versionExample], next_cursor: null } } },
        },
      },
    }),
    async (c) => c.json(await products.versions(c.get('principal'), c.req.valid('param').id, c.req.valid('query')), 200),
  )
  return app
}
