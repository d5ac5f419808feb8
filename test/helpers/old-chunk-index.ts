import type Database from 'better-sqlite3'

/**
 * Gives every chunk table of a readings file the binding index chunk tables were made with before
 * it was ordered by tote, `(binding_key, first_ts)` as `<table>_by_binding`, as an older file has.
 */
export function withTimeOrderedBindingIndex(db: Database.Database): void {
  for (const { name } of db
    .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE name LIKE 'chunks_day_%' AND type = 'table'")
    .all())
    db.exec(`DROP INDEX ${name}_by_binding_tote; CREATE INDEX ${name}_by_binding ON ${name} (binding_key, first_ts)`)
}
