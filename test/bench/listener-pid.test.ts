import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { listenerPid, localQuestdbPort } from './lib/listener-pid.js'
import { startQuestdbStandin, type StandIn } from './lib/questdb-bench.js'

/**
 * `bench:ingest --sink questdb` measures the QuestDB process's CPU beside the service's: it finds
 * that process by the listener of QUESTDB_CONFIG's HTTP port. The stand-in (its own process) plays
 * a QuestDB running on this machine.
 */
describe('the QuestDB process bench:ingest measures', () => {
  let standin: StandIn
  beforeAll(async () => {
    standin = await startQuestdbStandin(0)
  })
  afterAll(() => standin.close())

  it('is the process listening on QUESTDB_CONFIG’s HTTP port', () => {
    const port = localQuestdbPort(standin.config)
    expect(port).not.toBeNull()
    expect(listenerPid(port!)).toBe(standin.pid)
  })

  it('is looked for only when QUESTDB_CONFIG names this machine', () => {
    expect(localQuestdbPort('http::addr=localhost:9100;username=admin;password=quest;')).toBe(9100)
    expect(localQuestdbPort('http::addr=127.0.0.1;')).toBe(9000) // QuestDB's default HTTP port
    expect(localQuestdbPort('https::addr=questdb.example.com:9000;')).toBeNull()
  })
})
