import Database from 'better-sqlite3'

/**
 * A closed SQLite file's page size and free pages. A file keeps the size it reached and reuses its
 * free pages for later rows, so the bytes a store uses are its size less `freePages × pageSize`.
 */
export function sqlitePages(path: string): { pageSize: number; freePages: number } {
  const db = new Database(path, { readonly: true })
  try {
    return {
      pageSize: db.pragma('page_size', { simple: true }) as number,
      freePages: db.pragma('freelist_count', { simple: true }) as number,
    }
  } finally {
    db.close()
  }
}
