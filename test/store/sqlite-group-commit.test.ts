import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { Kysely, sql } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { GroupCommitSqliteDialect } from '../../src/store/sqlite-group-commit.js'

type Schema = { items: { id: number; name: string } }

describe('SQLite group commit', () => {
  let dir: string
  let file: string
  let db: Kysely<Schema>
  let commits: number

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rxtrace-group-commit-'))
    file = join(dir, 'test.db')
    const database = new SqliteDatabase(file)
    database.pragma('journal_mode = WAL')
    commits = 0
    // Count physical commits as SQLite sees them.
    const prepare = database.prepare.bind(database)
    database.prepare = ((text: string) => {
      const statement = prepare(text)
      if (text === 'commit') {
        const run = statement.run.bind(statement)
        statement.run = ((...args: unknown[]) => {
          commits += 1
          return run(...(args as []))
        }) as typeof statement.run
      }
      return statement
    }) as typeof database.prepare
    db = new Kysely<Schema>({ dialect: new GroupCommitSqliteDialect(database) })
    await sql`create table items (id integer primary key, name text not null unique)`.execute(db)
  })

  afterEach(async () => {
    await db.destroy()
    rmSync(dir, { recursive: true, force: true })
  })

  /** What another connection to the file sees: only committed rows. */
  const committedNames = () => {
    const reader = new SqliteDatabase(file, { readonly: true })
    try {
      return (reader.prepare('select name from items order by id').all() as { name: string }[]).map((r) => r.name)
    } finally {
      reader.close()
    }
  }

  const insert = (name: string) =>
    db.transaction().execute(async (trx) => {
      await trx
        .insertInto('items')
        .values({ name } as never)
        .execute()
      return name
    })

  it('commits the transactions of one turn together, and each resolves only once its rows are committed', async () => {
    const names = Array.from({ length: 50 }, (_, i) => `item-${i}`)
    const results = await Promise.all(
      names.map(async (name) => {
        const done = await insert(name)
        // At the moment a transaction resolves, another connection must already see its row.
        return { done, visible: committedNames().includes(name) }
      }),
    )
    expect(results.every((r) => r.visible)).toBe(true)
    expect(committedNames()).toEqual(names)
    expect(commits).toBeLessThan(5)
  })

  it('rolls back only the failing transaction of a group', async () => {
    const outcomes = await Promise.allSettled([
      insert('a'),
      db.transaction().execute(async (trx) => {
        await trx
          .insertInto('items')
          .values({ name: 'b' } as never)
          .execute()
        await trx
          .insertInto('items')
          .values({ name: 'a' } as never)
          .execute() // unique violation
      }),
      insert('c'),
    ])
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(committedNames()).toEqual(['a', 'c'])
  })

  it('rolls back a transaction whose callback throws, keeping the others of its group', async () => {
    const outcomes = await Promise.allSettled([
      insert('x'),
      db.transaction().execute(async (trx) => {
        await trx
          .insertInto('items')
          .values({ name: 'y' } as never)
          .execute()
        throw new Error('changed my mind')
      }),
      insert('z'),
    ])
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(committedNames()).toEqual(['x', 'z'])
  })

  it('a write outside any transaction is committed when it returns, with the group it joined', async () => {
    const pending = insert('in-group')
    await db
      .insertInto('items')
      .values({ name: 'alone' } as never)
      .execute()
    expect(committedNames()).toEqual(expect.arrayContaining(['alone']))
    await pending
    expect(committedNames().sort()).toEqual(['alone', 'in-group'])
  })

  it('a transaction sees the uncommitted writes of earlier transactions in its group (they run one at a time)', async () => {
    const [, count] = await Promise.all([
      insert('first'),
      db.transaction().execute(
        async (trx) =>
          (
            await trx
              .selectFrom('items')
              .select(sql<number>`count(*)`.as('n'))
              .executeTakeFirstOrThrow()
          ).n,
      ),
    ])
    expect(count).toBe(1)
  })

  it('a read outside any transaction sees only committed rows, never an open group whose COMMIT then fails', async () => {
    await insert('committed')
    // A deferred foreign key is checked at COMMIT: this group's COMMIT will fail.
    await sql`create table refs (id integer primary key, item_id integer references items(id) deferrable initially deferred)`.execute(db)
    await sql`pragma foreign_keys = on`.execute(db)
    const doomed = db.transaction().execute(async (trx) => {
      await trx
        .insertInto('items')
        .values({ name: 'never-committed' } as never)
        .execute()
      await sql`insert into refs (item_id) values (999)`.execute(trx)
    })
    // Read in the same turn, while the group is open (an API read between two requests' writes).
    const seen = db
      .selectFrom('items')
      .select('name')
      .orderBy('id')
      .execute()
      .then((rows) => rows.map((r) => r.name))
    const [outcome, names] = await Promise.allSettled([doomed, seen])
    expect(outcome.status).toBe('rejected')
    expect(names).toEqual({ status: 'fulfilled', value: ['committed'] })
  })

  describe('when SQLite rolls back the whole transaction (as on an I/O error or a full disk)', () => {
    beforeEach(async () => {
      await sql`create table poison (id integer primary key)`.execute(db)
      await sql`create trigger poison_rolls_back before insert on poison begin select raise(rollback, 'whole transaction rolled back'); end`.execute(
        db,
      )
    })

    it('inside a transaction: fails the group, and the next transaction works', async () => {
      const outcomes = await Promise.allSettled([
        insert('a'),
        db.transaction().execute(
          async (trx) =>
            void (await trx
              .insertInto('poison' as never)
              .values({ id: 1 } as never)
              .execute()),
        ),
        insert('c'),
      ])
      expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'fulfilled'])
      expect(committedNames()).toEqual(['c'])
    })

    it('outside any transaction: fails the open group, and later transactions are neither lost nor misreported', async () => {
      const outcomes = await Promise.allSettled([
        insert('a'),
        db
          .insertInto('poison' as never)
          .values({ id: 1 } as never)
          .execute(),
        insert('b'),
      ])
      expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'fulfilled'])
      expect(committedNames()).toEqual(['b'])
    })

    it('a transaction that catches the error cannot go on outside its transaction', async () => {
      const outcome = await db
        .transaction()
        .execute(async (trx) => {
          await trx
            .insertInto('poison' as never)
            .values({ id: 1 } as never)
            .execute()
            .catch(() => {})
          await trx
            .insertInto('items')
            .values({ name: 'after-rollback' } as never)
            .execute()
        })
        .then(
          () => 'committed',
          (error: Error) => error.message,
        )
      expect(outcome).toBe('SQLite rolled back the transaction')
      expect(committedNames()).toEqual([])
    })
  })

  it('fails every transaction of a group whose COMMIT fails, and the next group works', async () => {
    // A deferred foreign key is checked at COMMIT: one bad row fails the whole group's commit.
    await sql`create table refs (id integer primary key, item_id integer references items(id) deferrable initially deferred)`.execute(db)
    await sql`pragma foreign_keys = on`.execute(db)
    const outcomes = await Promise.allSettled([
      insert('kept-if-alone'),
      db.transaction().execute(async (trx) => void (await sql`insert into refs (item_id) values (999)`.execute(trx))),
    ])
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected'])
    expect(committedNames()).toEqual([])
    await insert('after')
    expect(committedNames()).toEqual(['after'])
  })
})
