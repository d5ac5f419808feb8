import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

export type MigrationStep = (db: Kysely<any>, dialect: Dialect) => Promise<void>

/** The column type of an auto-incrementing integer key in each dialect. */
export const autoIncrement = (dialect: Dialect) => (dialect === 'postgres' ? 'bigserial' : 'integer')
