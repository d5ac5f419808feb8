import type { SelectQueryBuilder } from 'kysely'
import { validationFailed } from '../errors.js'

export type Page<T> = { data: T[]; next_cursor: string | null }
export type PageRequest = { limit: number; cursor?: string | undefined }

/** Opaque cursors over a sortable key (our ids are ULIDs, events have a position). */
export const encodeCursor = (key: string | number) => Buffer.from(String(key)).toString('base64url')

export function decodeCursor(cursor: string): string {
  const key = Buffer.from(cursor, 'base64url').toString()
  if (!key || !/^[\w.:-]+$/.test(key)) throw validationFailed([{ pointer: '/query/cursor', message: 'is not a cursor this API returned' }])
  return key
}

/** Keyset pagination: `key > cursor` in key order, one extra row tells whether a next page exists. */
export async function paginate<DB, TB extends keyof DB, O extends Record<string, unknown>>(
  query: SelectQueryBuilder<DB, TB, O>,
  keyColumn: string,
  { limit, cursor }: PageRequest,
): Promise<Page<O>> {
  let q = query as SelectQueryBuilder<any, any, O>
  if (cursor) q = q.where(keyColumn, '>', decodeCursor(cursor))
  const rows = await q
    .orderBy(keyColumn)
    .limit(limit + 1)
    .execute()
  const data = rows.slice(0, limit)
  const last = data.at(-1)
  const keyName = keyColumn.split('.').pop()!
  return { data, next_cursor: rows.length > limit && last ? encodeCursor(String(last[keyName])) : null }
}
