import { sql } from 'kysely'
import { StartupError } from '../startup-error.js'
import type { Db } from './schema.js'
import { sealedKeyId, type SecretBox } from './secret-box.js'

/**
 * Every column holding a secret the service must use again, and the row id it is bound to
 * (the `context` of SecretBox). A new such column is added here, and sealed where it is written.
 */
const SEALED_COLUMNS = [
  { table: 'signing_keys', id: 'kid', column: 'private_jwk' },
  { table: 'webhook_signing_keys', id: 'kid', column: 'private_jwk' },
  { table: 'webhook_endpoints', id: 'id', column: 'secret' },
  { table: 'webhook_endpoints', id: 'id', column: 'previous_secret' },
  { table: 'delivery_pins', id: 'delivery_id', column: 'pin' },
] as const

type SealedColumn = (typeof SEALED_COLUMNS)[number]

/** The context a row's sealed values are bound to: its table and id. */
export const sealingContext = (table: SealedColumn['table'], id: string): string => `${table}:${id}`

/** What a pass over the sealed columns found and did. */
export type SealReport = {
  /** Values sealed here: they were in clear, or under a key other than the current one (rewrap). */
  sealed: number
  /** Values already under the current key. */
  current: number
  /** Values another process changed while this one worked; a second pass takes them. */
  skipped: number
}

/**
 * Start-up: refuses a store holding values sealed under a key this process lacks (a wrong or
 * missing SECRETS_KEY), then seals the values still in clear (written by a version before
 * sealing, or by such a copy during a rolling upgrade). Idempotent, and safe beside other copies:
 * each row is replaced only if it still holds what was read.
 */
export async function sealClearSecrets(db: Db, box: SecretBox, origin: string): Promise<SealReport> {
  const unknown = await unknownKeyIds(db, box)
  if (unknown.length > 0)
    throw new StartupError(
      `${origin}: the store's secrets are sealed under key ${unknown.join(', ')}, which this process does not hold ` +
        `(it holds ${box.keyIds.join(', ')}); set SECRETS_KEY to the key this store was written with ` +
        `(during a rotation, the other one in SECRETS_KEY_PREVIOUS)`,
    )
  return reseal(db, box, (stored) => sealedKeyId(stored) === null)
}

/** `keys rewrap`: every value not under the current key (clear ones too) sealed under it. */
export function rewrapSecrets(db: Db, box: SecretBox): Promise<SealReport> {
  return reseal(db, box, (stored) => sealedKeyId(stored) !== box.currentKeyId)
}

/** Ids of the keys that sealed stored values and that `box` does not hold. */
async function unknownKeyIds(db: Db, box: SecretBox): Promise<string[]> {
  const held = new Set(box.keyIds)
  const found = new Set<string>()
  for (const { table, id, column } of SEALED_COLUMNS) {
    for (const row of await readColumn(db, table, id, column)) {
      const keyId = sealedKeyId(row.value)
      if (keyId !== null && !held.has(keyId)) found.add(keyId)
    }
  }
  return [...found]
}

async function reseal(db: Db, box: SecretBox, needs: (stored: string) => boolean): Promise<SealReport> {
  const report: SealReport = { sealed: 0, current: 0, skipped: 0 }
  for (const { table, id, column } of SEALED_COLUMNS) {
    for (const row of await readColumn(db, table, id, column)) {
      if (!needs(row.value)) {
        report.current++
        continue
      }
      const context = sealingContext(table, row.id)
      const sealed = box.seal(context, box.open(context, row.value))
      // Compare-and-set: a rotation that replaced the value meanwhile wins, already sealed.
      const result =
        await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${sealed} where ${sql.ref(id)} = ${row.id} and ${sql.ref(column)} = ${row.value}`.execute(
          db,
        )
      if (Number(result.numAffectedRows ?? 0) === 1) report.sealed++
      else report.skipped++
    }
  }
  return report
}

async function readColumn(db: Db, table: string, id: string, column: string): Promise<{ id: string; value: string }[]> {
  const { rows } = await sql<{
    id: string
    value: string
  }>`select ${sql.ref(id)} as id, ${sql.ref(column)} as value from ${sql.table(table)} where ${sql.ref(column)} is not null`.execute(db)
  return rows
}
