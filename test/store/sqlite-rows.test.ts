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
 * have made, whatever happened to the schema since the statement was first run.
 */
describe('SQLite rows as objects', () => {
  let dir: string
  let file: string
  let database: SqliteDatabase.Database
  let db: Kysely<any>

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rxtrace-rows-'))
    file = join(dir, 'store.db')
    database = new SqliteDatabase(file)
    db = new Kysely<any>({ dialect: new GroupCommitSqliteDialect(database) })
    await sql`create table items (id integer primary key, name text, price real, photo blob, note text)`.execute(db)
    await sql`create table tags (id integer primary key, item_id integer, name text)`.execute(db)
    await sql`insert into items values (1, 'pen', 2.5, x'00ff', null), (2, 'ink', null, null, 'blue')`.execute(db)
    await sql`insert into tags values (7, 1, 'office')`.execute(db)
  })

  afterEach(async () => {
    await db.destroy()
    rmSync(dir, { recursive: true, force: true })
  })

  /** What better-sqlite3 itself returns for the same statement, read on the same connection. */
  const native = (text: string) => database.prepare(text).all() as object[]
  const read = async (text: string) => (await sql.raw(text).execute(db)).rows as object[]
  /** Rows, each with its keys in order: `toEqual` alone does not see the order. */
  const shown = (rows: object[]) => rows.map((row) => [Object.keys(row), row])
  const items = () => read('select * from items order by id')

  it('gives the same objects as better-sqlite3 on every run: values, types, key order, the later of two same-named columns', async () => {
    for (const text of [
      'select * from items order by id',
      'select name, id, name as label, price * 2 as double from items order by id',
      'select items.*, tags.* from items left join tags on tags.item_id = items.id order by items.id',
      'select count(*) as n from items where id > 5',
      'select * from items where id > 5',
      `select 1 as "__proto__", 2 as ok`,
    ]) {
      for (let run = 1; run <= 3; run++) expect(shown(await read(text)), `${text}, run ${run}`).toEqual(shown(native(text)))
    }
    const [pen] = await read('select photo from items where id = 1')
    expect(Buffer.isBuffer((pen as { photo: unknown }).photo)).toBe(true)
  })

  it('reads a column added after the statement was first run', async () => {
    await items()
    await sql`alter table items add column stock integer default 3`.execute(db)
    expect(shown(await items())[0]).toEqual([
      ['id', 'name', 'price', 'photo', 'note', 'stock'],
      { id: 1, name: 'pen', price: 2.5, photo: Buffer.from([0, 255]), note: null, stock: 3 },
    ])
  })

  it('names a renamed column by its new name, though the row is as wide as before', async () => {
    await items()
    await sql`alter table items rename column note to remark`.execute(db)
    expect((await items())[1]).toEqual({ id: 2, name: 'ink', price: null, photo: null, remark: 'blue' })
  })

  it('names the columns another connection renamed or added', async () => {
    await items()
    await items()
    const other = new SqliteDatabase(file)
    other.exec(`alter table items rename column note to remark`)
    expect((await items())[1]).toEqual({ id: 2, name: 'ink', price: null, photo: null, remark: 'blue' })
    other.exec(`alter table items add column colour text default 'red'`)
    other.close()
    expect((await items())[1]).toEqual({ id: 2, name: 'ink', price: null, photo: null, remark: 'blue', colour: 'red' })
  })

  it('names the columns as they are again after a schema change is rolled back', async () => {
    await items()
    await expect(
      db.transaction().execute(async (trx) => {
        await sql`alter table items rename column note to remark`.execute(trx)
        expect((await sql.raw('select * from items order by id').execute(trx)).rows[1]).toHaveProperty('remark', 'blue')
        throw new Error('changed my mind')
      }),
    ).rejects.toThrow('changed my mind')
    expect((await items())[1]).toEqual({ id: 2, name: 'ink', price: null, photo: null, note: 'blue' })
  })

  it('runs a statement that writes and returns rows once, even when the table changed under it', async () => {
    const add = (name: string) => db.insertInto('tags').values({ item_id: 1, name }).returningAll().execute()
    await add('a')
    const other = new SqliteDatabase(file)
    other.exec(`alter table tags add column colour text default 'red'`)
    other.close()
    expect(await add('b')).toEqual([{ id: 9, item_id: 1, name: 'b', colour: 'red' }])
    expect(native('select name from tags order by id')).toEqual([{ name: 'office' }, { name: 'a' }, { name: 'b' }])
  })
})
