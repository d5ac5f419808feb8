import type { Logger } from 'pino'
import { iso, type Clock } from '../clock.js'
import type { Db, Executor } from '../store/schema.js'
import type { DynamicSecurity } from './dynsec.js'
import type { PasswordSeal } from './seal.js'

// Retry pause after a failed attempt: 1 s, doubling, at most a minute (a broker that is down for
// an hour is tried 60 times, not thousands).
const FIRST_RETRY_MS = 1_000
const MAX_RETRY_MS = 60_000
// Rows taken per pass: a burst of registrations goes out in a few messages' time, one pass at a time.
const BATCH = 50

/**
 * The outbox of tote accounts for an external broker (docs/deployment.md, Tote credentials).
 * `POST /v1/totes` adds a row in the transaction that registers the tote, so a tote is never
 * registered without it; a pass gives the broker each due row's account and deletes the row.
 * A broker that is down or refuses leaves the row for a later pass, with a growing pause. Every
 * copy runs passes; the commands are idempotent, so two copies taking one row do no harm.
 */
export class BrokerAccounts {
  private passing: Promise<void> | null = null
  private again = false
  private dynsec: DynamicSecurity | null = null

  constructor(private readonly deps: { db: Db; clock: Clock; seal: PasswordSeal; logger: Logger }) {}

  /** Inside the registering transaction: the account waits here until the broker has it. */
  async enqueue(trx: Executor, toteId: string, password: string): Promise<void> {
    const now = this.deps.clock.now()
    await trx
      .insertInto('broker_accounts')
      .values({
        tote_id: toteId,
        sealed_password: this.deps.seal.seal(toteId, password),
        next_attempt_at: now,
        last_error: null,
        created_at: iso(now),
      })
      .execute()
  }

  /** The connection passes use; null (before start-up has connected, or while stopping) makes passes wait. */
  attach(dynsec: DynamicSecurity | null): void {
    this.dynsec = dynsec
  }

  /**
   * Runs a pass now (or right after the one running); resolves when that pass is over. A
   * tote registered just before this call is provisioned by then, if the broker is up.
   */
  provisionDue(): Promise<void> {
    if (this.passing) {
      this.again = true
      return this.passing.then(() => this.passing ?? undefined)
    }
    this.passing = this.pass().finally(() => {
      this.passing = null
      if (this.again) {
        this.again = false
        void this.provisionDue()
      }
    })
    return this.passing
  }

  /** Accounts still waiting for the broker (a gauge for operators, and tests). */
  async pending(): Promise<number> {
    const row = await this.deps.db
      .selectFrom('broker_accounts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
    return Number(row.n)
  }

  private async pass(): Promise<void> {
    const dynsec = this.dynsec
    if (!dynsec) return
    const { db, clock, seal, logger } = this.deps
    const due = await db
      .selectFrom('broker_accounts')
      .selectAll()
      .where('next_attempt_at', '<=', clock.now())
      .orderBy('next_attempt_at')
      .limit(BATCH)
      .execute()
    for (const row of due) {
      try {
        await dynsec.provisionTote(row.tote_id, seal.open(row.tote_id, row.sealed_password))
        await db.deleteFrom('broker_accounts').where('tote_id', '=', row.tote_id).execute()
        logger.info({ toteId: row.tote_id, attempts: row.attempts + 1 }, 'tote account given to the MQTT broker')
      } catch (error) {
        const attempts = row.attempts + 1
        const pauseMs = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (attempts - 1))
        const reason = (error as Error).message
        logger.warn(
          { toteId: row.tote_id, attempts, retryInMs: pauseMs, reason },
          'could not give a tote account to the MQTT broker; will retry',
        )
        await db
          .updateTable('broker_accounts')
          .set({ attempts, next_attempt_at: clock.now() + pauseMs, last_error: reason.slice(0, 500) })
          .where('tote_id', '=', row.tote_id)
          .execute()
      }
    }
  }
}
