/**
 * The tables of products and their stability versions (migration 0030), kept beside the main
 * schema: products are registered per pharmacy (or for every pharmacy), and each stability version
 * is a new row, never updated.
 */
export interface StabilityTables {
  products: {
    id: string
    /** 11-digit 5-4-2 form with dashes (src/domain/ndc.ts). */
    ndc: string
    name: string
    /** Null: every pharmacy's product (registered by an unrestricted client). */
    pharmacy_id: string | null
    /** pharmacy_id, or '*' for every pharmacy: one product per NDC and owner (a unique index; NULLs never collide in SQL). */
    owner_key: string
    created_at: string
    created_by: string
  }
  product_stability_versions: {
    product_id: string
    version: number
    /** ProductStability as JSON (rules/stability.ts). */
    stability: string
    effective_from: string
    created_at: string
    created_by: string
    /** JSON of the e-signature of a person who added it (migration 0037); null when a machine client did. */
    signature: string | null
  }
  /** A cold-chain delivery's items judged by their products (migration 0031); absent for deliveries without any. */
  delivery_stability: {
    delivery_id: string
    /** StabilityPlan as JSON (rules/stability-ledger.ts): the versions recorded at creation, earlier legs' ledger, the legs. */
    plan: string
  }
  /** Excursion assessments (migration 0034): budget given back to one band of one item; never deleted, withdrawn instead. */
  stability_assessments: {
    id: string
    delivery_id: string
    /** The item's NDC as the ledger shows it (5-4-2). */
    ndc: string
    /** Index of the band in the item's product stability version. */
    band: number
    add_back_s: number
    justification: string
    /** {client_id, sub} of the pharmacist, as JSON. */
    assessed_by: string
    created_at: string
    withdrawn_by: string | null
    withdrawn_at: string | null
    /** JSON of the pharmacist's e-signature, meaning `assessed` (migration 0038); null on older rows. */
    signature: string | null
    /** JSON of the e-signature of the withdrawal, meaning `assessed` (migration 0038). */
    withdrawal_signature: string | null
  }
}
