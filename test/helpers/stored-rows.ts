import { sql } from 'kysely'
import type { TestApi } from './service.js'
import type { StoreUnderTest } from './stores.js'

/**
 * Every row of every table of the service's store, as JSON text: where a test looks for a secret
 * (a password, a PIN) that must not be stored. `skip` names tables left out (image bytes, say).
 */
export async function everyStoredRow(api: TestApi, store: StoreUnderTest['name'], skip: string[] = []): Promise<string> {
  const db = api.service.db
  const tables =
    store === 'postgres'
      ? (
          await sql<{
            name: string
          }>`select table_name as name from information_schema.tables where table_schema = current_schema()`.execute(db)
        ).rows
      : (await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db)).rows
  const dumps: string[] = []
  for (const { name } of tables) {
    if (skip.includes(name)) continue
    dumps.push(JSON.stringify((await sql`select * from ${sql.table(name)}`.execute(db)).rows))
  }
  return dumps.join('\n')
}
