import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { AuditLog, type NewAuditEntry } from '../../src/auth/audit-log.js'
import { openEntityStore, type EntityStore } from '../../src/store/database.js'

/**
 * On SQLite a process links each write's record to the head it last wrote, checked by the insert
 * itself. The chain must stay whole when that head is stale: a transaction that appended and
 * then rolled back, and another process (the CLI) appending to the same file meanwhile.
 */
const stores: EntityStore[] = []
afterAll(async () => {
  for (const store of stores) await store.close()
})

const entry = (n: number): NewAuditEntry => ({
  jti: null,
  client_id: 'cl_test',
  sub: 'cl_test',
  method: 'POST',
  path: `/v1/things/${n}`,
  status: 201,
  request_id: `req_${n}`,
})

describe('the SQLite audit chain with a stale head', () => {
  it('stays whole across a rolled-back append and a second writer on the same file', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'audit-chain-')), 'rx.db')
    const service = await openEntityStore({ kind: 'sqlite', file })
    stores.push(service)
    const cli = await openEntityStore({ kind: 'sqlite', file })
    stores.push(cli)
    const clock = { now: () => Date.now() }
    const ours = new AuditLog(service.db, 'sqlite', clock)
    const theirs = new AuditLog(cli.db, 'sqlite', clock)

    await ours.commit(entry(1))
    await ours.commit(entry(2))
    // A change that wrote its record and then failed: both roll back.
    await expect(
      service.db.transaction().execute(async (trx) => {
        await ours.append(trx, entry(3))
        throw new Error('the change failed after its record')
      }),
    ).rejects.toThrow('the change failed')
    await ours.commit(entry(4))
    await theirs.commit(entry(5)) // another process appends
    await ours.commit(entry(6))
    await ours.append(service.db, entry(7)) // outside a transaction: commits by itself
    await theirs.commit(entry(8))
    await ours.commit(entry(9))

    const verdict = await ours.verify({ limit: 100 })
    expect(verdict).toMatchObject({ scope: 'deployment', valid: true, checked: 8, next_pos: null })
    const paths = await service.db.selectFrom('audit_events').select('path').orderBy('pos').execute()
    expect(paths.map((p) => Number(p.path.split('/').at(-1)))).toEqual([1, 2, 4, 5, 6, 7, 8, 9])
  })
})
