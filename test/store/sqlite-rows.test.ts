import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { Kysely, sql } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-group-commit.js'

/**
 * Rows read through the entity store's SQLite driver are built from raw arrays by a function made
 * per statement (src/store/sqlite-rows.ts). They must be exactly the objects better-sqlite3 would
 * have made, before and after the schema changes under a cached statement.
 */
describe('SQLite rows as objects', () => {
  let database: SqliteDatabase.Database
  let db: Kysely<any>

  beforeEach(async () => {
    database = new SqliteDatabase(':memory:')
    db = new Kysely<any>({ dialect: new GroupCommitSqliteDialect(database) })
    await sql`create table items (id integer primary key, name text, price real, photo blob, note text)`.execute(db)
    await sql`create table tags (id integer primary key, item_id integer, name text)`.execute(db)
    await sql`insert into items values (1, 'pen', 2.5, x'00ff', null), (2, 'ink', null, null, 'blue')`.execute(db)
    await sql`insert into tags values (7, 1, 'office')`.execute(db)
  })

  afterEach(async () => {
    await db.destroy()
  })

  /** What better-sqlite3 itself returns for the same statement, read on the same connection. */
  const native = (text: string) => database.prepare(text).all()

  it('gives the same objects as better-sqlite3: values, types, key order, the later of two same-named columns', async () => {
    for (const text of [
      'select * from items order by id',
      'select name, id, name as label, price * 2 as double from items order by id',
      'select items.*, tags.* from items left join tags on tags.item_id = items.id order by items.id',
      'select count(*) as n from items where id > 5',
      'select * from items where id > 5',
    ]) {
      const { rows } = await sql.raw(text).execute(db)
      expect(rows, text).toEqual(native(text))
      expect(
        rows.map((row) => Object.keys(row as object)),
        text,
      ).toEqual(native(text).map((row) => Object.keys(row as object)))
    }
    const { rows } = await sql.raw('select photo from items where id = 1').execute(db)
    expect(Buffer.isBuffer((rows[0] as { photo: unknown }).photo)).toBe(true)
  })

  it('reads a column added after the statement was first run', async () => {
    const all = () => db.selectFrom('items').selectAll().orderBy('id').execute()
    expect(Object.keys((await all())[0]!)).toEqual(['id', 'name', 'price', 'photo', 'note'])
    await sql`alter table items add column stock integer default 3`.execute(db)
    expect((await all())[0]).toEqual({ id: 1, name: 'pen', price: 2.5, photo: Buffer.from([0, 255]), note: null, stock: 3 })
  })

  it('names a renamed column by its new name, though the row is as wide as before', async () => {
    const all = () => db.selectFrom('items').selectAll().orderBy('id').execute()
    await all()
    await sql`alter table items rename column note to remark`.execute(db)
    const [first, second] = await all()
    expect(second).toEqual({ id: 2, name: 'ink', price: null, photo: null, remark: 'blue' })
    expect(first).not.toHaveProperty('note')
  })

  it('reads a column another connection added (the row is wider than the statement knew)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rxtrace-rows-'))
    const file = join(dir, 'store.db')
    const own = new SqliteDatabase(file)
    const store = new Kysely<any>({ dialect: new GroupCommitSqliteDialect(own) })
    try {
      await sql`create table items (id integer primary key, name text)`.execute(store)
      await sql`insert into items values (1, 'pen')`.execute(store)
      const all = () => store.selectFrom('items').selectAll().execute()
      expect(await all()).toEqual([{ id: 1, name: 'pen' }])
      expect(await all()).toEqual([{ id: 1, name: 'pen' }])
      const other = new SqliteDatabase(file)
      other.exec(`alter table items add column colour text default 'red'`)
      other.close()
      expect(await all()).toEqual([{ id: 1, name: 'pen', colour: 'red' }])
    } finally {
      await store.destroy()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('leaves a column named __proto__ a plain property, as better-sqlite3 does', async () => {
    const text = `select 1 as "__proto__", 2 as ok`
    const { rows } = await sql.raw(text).execute(db)
    expect(rows).toEqual(native(text))
    expect(Object.getPrototypeOf(rows[0])).toBe(Object.prototype)
  })
})
