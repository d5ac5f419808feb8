import type { Signer } from '../auth/e-signatures.js'
import type { Principal } from '../auth/scopes.js'
import { stabilityRecordHash, type StoredSignature } from '../domain/e-signature.js'
import { canSee } from '../auth/tenancy.js'
import { iso } from '../clock.js'
import { NDC_SHAPES_HELP, normalizeNdc } from '../domain/ndc.js'
import { AppError, notFound, validationFailed } from '../errors.js'
import { newId } from '../ids.js'
import type { ItemStability, ProductStability, StabilityPlan } from '../../rules/index.js'
import { isUniqueViolation } from '../store/errors.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'
import { precompiled } from '../store/precompiled.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { Database, Executor } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { addNextVersion, effectiveFromOf } from './versions.js'

export type Product = {
  id: string
  ndc: string
  name: string
  pharmacy_id: string | null
  stability: ProductStability
  version: number
  effective_from: string
  created_at: string
}
export type StabilityVersion = {
  product_id: string
  version: number
  stability: ProductStability
  effective_from: string
  created_at: string
  /** The approving person's e-signature; null for a version a machine client added. */
  signature: StoredSignature | null
  /** Whether the signature's record_hash is this version's content: false for a signature moved from another record. */
  signature_verified: boolean | null
}

export type NewProduct = { ndc: string; name: string; pharmacy_id?: string | null | undefined; stability: ProductStability }
export type NewStabilityVersion = { stability: ProductStability; effective_from?: string | undefined; version?: number | undefined }

type ProductRow = Database['products']
type VersionRow = Database['product_stability_versions']

/** Every pharmacy's products are registered under this owner key. */
const EVERY_PHARMACY = '*'

/** Products by NDC and their stability versions, added and never edited (docs/stability.md). */
export class ProductService {
  constructor(private readonly deps: ServiceDeps) {}

  async create(principal: Principal, input: NewProduct, record?: RecordAnswer<Product>): Promise<Product> {
    const ndc = ndcOr422(input.ndc, '/ndc')
    const pharmacyId = await this.ownerFor(principal, input.pharmacy_id)
    const now = iso(this.deps.clock.now())
    const product: ProductRow = {
      id: newId('pr'),
      ndc,
      name: input.name,
      pharmacy_id: pharmacyId,
      owner_key: pharmacyId ?? EVERY_PHARMACY,
      created_at: now,
      created_by: principal.clientId,
    }
    const version: VersionRow = {
      product_id: product.id,
      version: 1,
      stability: JSON.stringify(input.stability),
      effective_from: now,
      created_at: now,
      created_by: principal.clientId,
      signature: null,
    }
    try {
      return await this.deps.db.transaction().execute(async (trx) => {
        await trx.insertInto('products').values(product).execute()
        await trx.insertInto('product_stability_versions').values(version).execute()
        const answer = toProduct(product, version)
        await record?.(trx, answer)
        return answer
      })
    } catch (error) {
      if (!isUniqueViolation(error)) throw error
      throw new AppError('conflict', `A product with NDC ${ndc} is already registered for ${pharmacyId ?? 'every pharmacy'}.`)
    }
  }

  /** The product with the stability version in force now. */
  async get(principal: Principal, id: string): Promise<Product> {
    const product = await this.visible(principal, id)
    const version = await stabilityInForce(this.deps.db, id, iso(this.deps.clock.now()))
    return toProduct(product, version!)
  }

  async list(principal: Principal, query: PageRequest & { ndc?: string | undefined }): Promise<Page<Product>> {
    let q = this.deps.db.selectFrom('products').selectAll()
    if (query.ndc !== undefined) q = q.where('ndc', '=', ndcOr422(query.ndc, '/ndc'))
    if (principal.fleetId) q = q.where('id', '=', '') // fleets see no products
    if (principal.pharmacyId) q = q.where('owner_key', 'in', [principal.pharmacyId, EVERY_PHARMACY])
    const page = await paginate(q, 'id', query)
    const now = iso(this.deps.clock.now())
    const data = await Promise.all(page.data.map(async (p) => toProduct(p, (await stabilityInForce(this.deps.db, p.id, now))!)))
    return { data, next_cursor: page.next_cursor }
  }

  async versions(principal: Principal, id: string, page: PageRequest): Promise<Page<StabilityVersion>> {
    await this.visible(principal, id)
    const result = await paginate(
      this.deps.db.selectFrom('product_stability_versions').selectAll().where('product_id', '=', id),
      'version',
      page,
    )
    return { data: result.data.map(toVersion), next_cursor: result.next_cursor }
  }

  /** A new stability version; effective now unless `effective_from` names a later time. */
  async putStability(
    principal: Principal,
    id: string,
    input: NewStabilityVersion,
    record?: RecordAnswer<StabilityVersion>,
    signer?: Signer,
  ): Promise<StabilityVersion> {
    const product = await this.visible(principal, id)
    if (product.pharmacy_id === null && (principal.pharmacyId || principal.fleetId))
      throw new AppError('insufficient_scope', "Only an unrestricted client changes every pharmacy's products.")
    const now = this.deps.clock.now()
    // Versions in force at past prescriptions stay as they were: a new one starts now or later.
    const effectiveFrom = effectiveFromOf(input.effective_from, now)
    return addNextVersion('stability version', () =>
      this.deps.db.transaction().execute(async (trx) => {
        const last = await trx
          .selectFrom('product_stability_versions')
          .select('version')
          .where('product_id', '=', id)
          .orderBy('version', 'desc')
          .limit(1)
          .executeTakeFirstOrThrow()
        // Versions are never edited: naming an older one is refused, so a stale editor learns it.
        if (input.version !== undefined && input.version !== last.version)
          throw validationFailed([
            {
              pointer: '/version',
              message: `version ${input.version} is not the latest (${last.version}); versions are never edited, a PUT adds the next one`,
            },
          ])
        const version = last.version + 1
        const signature: StoredSignature | null = signer
          ? {
              id: newId('sg'),
              signer: signer.id,
              name: signer.name,
              email: signer.email,
              meaning: signer.meaning,
              signed_at: iso(now),
              record_hash: stabilityRecordHash({ product_id: id, version, stability: input.stability, effective_from: effectiveFrom }),
              method: signer.method,
            }
          : null
        const row: VersionRow = {
          product_id: id,
          version,
          stability: JSON.stringify(input.stability),
          effective_from: effectiveFrom,
          created_at: iso(now),
          created_by: principal.clientId,
          signature: signature && JSON.stringify(signature),
        }
        await trx.insertInto('product_stability_versions').values(row).execute()
        const answer = toVersion(row)
        await record?.(trx, answer)
        return answer
      }),
    )
  }

  /** Whose product a request makes: a pharmacy token its own; an unrestricted client the one named, or every pharmacy's. */
  private async ownerFor(principal: Principal, requested: string | null | undefined): Promise<string | null> {
    if (principal.fleetId) throw new AppError('insufficient_scope', 'A fleet registers no products.')
    if (principal.pharmacyId) {
      if (requested === null) throw new AppError('insufficient_scope', "Only an unrestricted client registers every pharmacy's products.")
      if (requested !== undefined && requested !== principal.pharmacyId) throw notFound('pharmacy')
      return principal.pharmacyId
    }
    if (requested === undefined || requested === null) return null
    const pharmacy = await this.deps.db.selectFrom('pharmacies').select('id').where('id', '=', requested).executeTakeFirst()
    if (!pharmacy) throw notFound('pharmacy')
    return requested
  }

  /** Every pharmacy's products are seen by every pharmacy; a pharmacy's own by that pharmacy; none by a fleet. */
  private async visible(principal: Principal, id: string): Promise<ProductRow> {
    const row = await this.deps.db.selectFrom('products').selectAll().where('id', '=', id).executeTakeFirst()
    if (!row || principal.fleetId || (row.pharmacy_id !== null && !canSee(principal, row))) throw notFound('product')
    return row
  }
}

function ndcOr422(text: string, pointer: string): string {
  const ndc = normalizeNdc(text)
  if (ndc === null) throw validationFailed([{ pointer, message: NDC_SHAPES_HELP }])
  return ndc
}

/** The version in force at `at`: the latest `effective_from` not after it (the higher version on a tie). */
async function stabilityInForce(db: Executor, productId: string, at: string): Promise<VersionRow | undefined> {
  const [version] = await versionInForce(db, productId, at)
  return version
}

const versionInForce = precompiled((db, productId: string, at: string) =>
  db
    .selectFrom('product_stability_versions')
    .selectAll()
    .where('product_id', '=', productId)
    .where('effective_from', '<=', at)
    .orderBy('effective_from', 'desc')
    .orderBy('version', 'desc')
    .limit(1),
)

function toProduct(product: ProductRow, version: VersionRow): Product {
  return {
    id: product.id,
    ndc: product.ndc,
    name: product.name,
    pharmacy_id: product.pharmacy_id,
    stability: JSON.parse(version.stability) as ProductStability,
    version: version.version,
    effective_from: version.effective_from,
    created_at: product.created_at,
  }
}

function toVersion(row: VersionRow): StabilityVersion {
  const stability = JSON.parse(row.stability) as ProductStability
  const signature = row.signature ? (JSON.parse(row.signature) as StoredSignature) : null
  return {
    product_id: row.product_id,
    version: row.version,
    stability,
    effective_from: row.effective_from,
    created_at: row.created_at,
    signature,
    // Recomputed on every read (21 CFR 11.70): the signature must hash to this version's own content.
    signature_verified: signature
      ? signature.record_hash ===
        stabilityRecordHash({ product_id: row.product_id, version: row.version, stability, effective_from: row.effective_from })
      : null,
  }
}

/**
 * The stability plan of a new cold-chain delivery: each item whose NDC names a product (the pharmacy's
 * own first, else every pharmacy's) with the version in force at `createdAt`. Null when none does.
 */
export async function stabilityPlanFor(
  db: Executor,
  pharmacyId: string,
  items: readonly { ndc?: string | undefined }[],
  createdAt: string,
  deliveryId: string,
): Promise<StabilityPlan | null> {
  const judged: ItemStability[] = []
  for (const item of items) {
    const ndc = item.ndc === undefined ? null : normalizeNdc(item.ndc)
    if (ndc === null) continue
    const products = await productsOfNdc(db, ndc, pharmacyId)
    const product = products.find((p) => p.owner_key === pharmacyId) ?? products[0]
    if (!product) continue
    const version = await stabilityInForce(db, product.id, createdAt)
    if (!version) continue
    judged.push({ ndc, product_id: product.id, version: version.version, stability: JSON.parse(version.stability) as ProductStability })
  }
  if (judged.length === 0) return null
  const [pharmacy] = await releasePolicyOf(db, pharmacyId)
  // Released by budget only when every item has a product: anything else goes to a person as today.
  const auto = pharmacy?.release_policy === 'auto_within_budget' && judged.length === items.length
  return { items: judged, carried: null, legs: [deliveryId], auto }
}

// On the create path of every cold-chain delivery: compiled once (src/store/precompiled.ts).
const productsOfNdc = precompiled((db, ndc: string, pharmacyId: string) =>
  db.selectFrom('products').select(['id', 'owner_key']).where('ndc', '=', ndc).where('owner_key', 'in', [pharmacyId, EVERY_PHARMACY]),
)
const releasePolicyOf = precompiled((db, pharmacyId: string) =>
  db.selectFrom('pharmacies').select('release_policy').where('id', '=', pharmacyId),
)
