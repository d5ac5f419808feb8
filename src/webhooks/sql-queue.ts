import { sql } from 'kysely'
import { iso } from '../clock.js'
import { newId } from '../ids.js'
import { envelopeFromRow, type Outbox } from '../events/outbox.js'
import type { Database, Db, Executor } from '../store/schema.js'
import { sealingContext } from '../store/sealed-secrets.js'
import type { SecretBox } from '../store/secret-box.js'
import type { AttemptRecord, ClaimRequest, DeliveryQueue, PendingDelivery } from './delivery-queue.js'

/** Attempts written per transaction; 200 rows × 10 columns stay far below both engines' bind-parameter limits. */
const MAX_RECORD_BATCH = 200
/**
 * A claim looks at no more than this many times `limit` of the oldest due rows. Reading the
 * due index in order and stopping there keeps a claim's cost independent of the backlog; the
 * per-endpoint cap is then applied to those rows. An endpoint whose rows fill the window gets
 * its wave and is excluded from the next claim while saturated, so the others come next.
 */
const CLAIM_WINDOW_FACTOR = 4

/** The media type of a FHIR R4 JSON resource (FHIR R4 http.html#mime-type). */
const FHIR_JSON = 'application/fhir+json'

/** What of an outcome event a writeback in another format is rendered from. */
export type OutcomeEvent = { id: string; created_at: string; delivery_id: string | null; rx_id: string | null }
/** Renders a `fhir-r4` writeback (src/services/fhir-writeback.ts): the delivery as it stands, as a FHIR Bundle. */
export type RenderFhirWriteback = (event: OutcomeEvent) => Promise<string>

type PendingRecord = { record: AttemptRecord; resolve: () => void; reject: (err: unknown) => void }

/**
 * The dispatcher's queue over the entity store (SQLite or PostgreSQL). A claim leases rows by a
 * conditional update, so two dispatchers never attempt the same row at once and a crashed one's
 * rows come due again when their lease runs out. Attempts are recorded in group commits: those
 * that finish while a transaction is being written share the next one.
 */
export class SqlDeliveryQueue implements DeliveryQueue {
  private readonly unrecorded: PendingRecord[] = []
  private recording = false
  /** Kind of every endpoint claimed from (it never changes), so recording need not look it up. */
  private readonly endpointKinds = new Map<string, Database['webhook_endpoints']['kind']>()

  constructor(
    private readonly db: Db,
    private readonly outbox: Outbox,
    private readonly secrets: SecretBox,
    /** A message whose endpoint secret this process cannot open (a key it was not given); it is left to its lease. */
    private readonly onUnopenedSecret: (endpointId: string, error: Error) => void = () => {},
    /** Bodies of `fhir-r4` writebacks; without it such messages are left to their lease. */
    private readonly renderFhir?: RenderFhirWriteback,
  ) {}

  async claimDue({ nowMs, limit, perEndpointLimit, excludeEndpointIds, leaseUntilMs }: ClaimRequest): Promise<PendingDelivery[]> {
    const excluded = excludeEndpointIds.length ? sql`and m.endpoint_id not in (${sql.join(excludeEndpointIds)})` : sql``
    // One statement picks and leases: the lease condition is checked again on each row as it
    // is updated, so of two dispatchers racing for a row only one gets it. The row's next
    // attempt moves to the lease's end too: a leased row leaves the due range, so claims do not
    // read past the rows in flight, and after a crash it is due exactly when its lease runs out.
    const claimed = await sql<{ id: string }>`
      update webhook_messages set lease_until = ${leaseUntilMs}, next_attempt_at = ${leaseUntilMs}
      where id in (
        select id from (
          select c.id, c.next_attempt_at, row_number() over (partition by c.endpoint_id order by c.next_attempt_at) as rank
          from (
            select m.id, m.endpoint_id, m.next_attempt_at
            from webhook_messages m join webhook_endpoints e on e.id = m.endpoint_id
            where m.state = 'pending' and m.next_attempt_at <= ${nowMs} and (m.lease_until is null or m.lease_until <= ${nowMs})
              and e.enabled = 1 ${excluded}
            order by m.next_attempt_at limit ${limit * CLAIM_WINDOW_FACTOR}
          ) c
        ) due where rank <= ${perEndpointLimit} order by next_attempt_at limit ${limit}
      ) and (lease_until is null or lease_until <= ${nowMs})
      returning id`
      .execute(this.db)
      .then((result) => result.rows)
    if (claimed.length === 0) return []
    const rows = await this.db
      .selectFrom('webhook_messages as m')
      .innerJoin('webhook_endpoints as e', 'e.id', 'm.endpoint_id')
      .innerJoin('events as ev', 'ev.id', 'm.event_id')
      .select([
        'm.id as message_id',
        'm.attempts',
        'e.id as endpoint_id',
        'e.kind',
        'e.url',
        'e.secret',
        'e.previous_secret',
        'e.previous_secret_expires_at',
        'e.failing_since',
        'e.signature_scheme',
        'e.body_format',
      ])
      .select(['ev.id', 'ev.type', 'ev.created_at', 'ev.pharmacy_id', 'ev.fleet_id', 'ev.delivery_id', 'ev.rx_id', 'ev.seq', 'ev.data'])
      .where(
        'm.id',
        'in',
        claimed.map((r) => r.id),
      )
      .orderBy('m.created_at')
      .orderBy('m.id')
      .execute()
    for (const row of rows) this.endpointKinds.set(row.endpoint_id, row.kind)
    const due: PendingDelivery[] = []
    for (const row of rows) {
      const sealed = row.previous_secret && (row.previous_secret_expires_at ?? 0) > nowMs ? [row.secret, row.previous_secret] : [row.secret]
      let secrets: string[]
      try {
        secrets = sealed.map((s) => this.secrets.open(sealingContext('webhook_endpoints', row.endpoint_id), s))
      } catch (error) {
        // Left leased: it comes due again when the lease ends, for a copy that holds the key.
        this.onUnopenedSecret(row.endpoint_id, error as Error)
        continue
      }
      let body: string
      try {
        body = row.body_format === 'fhir-r4' ? await this.renderBundle(row) : JSON.stringify(envelopeFromRow(row))
      } catch (error) {
        // Left leased, like an unopened secret: it comes due again when the lease ends.
        this.onUnopenedSecret(row.endpoint_id, error as Error)
        continue
      }
      due.push({
        id: row.message_id,
        endpointId: row.endpoint_id,
        url: row.url,
        secrets,
        ...(row.signature_scheme === 'v1a' ? { signatureScheme: 'v1a' as const } : {}),
        ...(row.body_format === 'fhir-r4' ? { contentType: FHIR_JSON } : {}),
        eventId: row.id,
        body,
        attempt: row.attempts + 1,
        endpointFailingSinceMs: row.failing_since,
      })
    }
    return due
  }

  private renderBundle(event: OutcomeEvent): Promise<string> {
    if (!this.renderFhir) throw new Error('this queue renders no fhir-r4 writebacks')
    return this.renderFhir(event)
  }

  /** Resolves once the attempt is committed, together with the others that finished meanwhile. */
  recordAttempt(record: AttemptRecord): Promise<void> {
    return new Promise((resolve, reject) => {
      this.unrecorded.push({ record, resolve, reject })
      void this.recordQueued()
    })
  }

  /** Group commit: one transaction at a time, each taking what queued up while the last was written. */
  private async recordQueued(): Promise<void> {
    if (this.recording) return
    this.recording = true
    try {
      // Attempts that complete in this same turn of the event loop join the first batch.
      await new Promise((resolve) => setImmediate(resolve))
      while (this.unrecorded.length > 0) {
        const batch = this.unrecorded.splice(0, MAX_RECORD_BATCH)
        try {
          const messages = await this.db.transaction().execute((trx) =>
            writeAttempts(
              trx,
              batch.map((b) => b.record),
              this.outbox,
              this.endpointKinds,
            ),
          )
          for (const { resolve } of batch) resolve()
          this.outbox.committed(messages)
        } catch (err) {
          for (const { reject } of batch) reject(err)
        }
      }
    } finally {
      this.recording = false
    }
  }
}

/**
 * What `recordAttempt` promises, for a batch, in one transaction: the attempts; each message's
 * next attempt, lease release or final state; each endpoint's failing-since and disabling; and
 * writeback outcomes. Set-based, so a batch costs a handful of statements, not four per attempt.
 * Returns how many webhook messages the writeback events queued.
 */
async function writeAttempts(trx: Executor, records: AttemptRecord[], outbox: Outbox, kinds: ReadonlyMap<string, string>): Promise<number> {
  await trx
    .insertInto('webhook_attempts')
    .values(
      records.map((record) => ({
        id: newId('att'),
        message_id: record.deliveryId,
        endpoint_id: record.endpointId,
        event_id: record.eventId,
        attempt: record.attempt,
        at: iso(record.attemptedAtMs),
        status_code: record.statusCode,
        error: record.error,
        duration_ms: Math.round(record.durationMs),
        success: record.success ? 1 : 0,
      })),
    )
    .execute()

  // Messages: one update per distinct outcome (a healthy batch is one: delivered at attempt 1).
  const outcomes = new Map<string, { state: 'pending' | 'delivered' | 'failed'; attempts: number; next: number | null; ids: string[] }>()
  const latest = new Map(records.map((record) => [record.deliveryId, record]))
  for (const record of latest.values()) {
    const state = record.success ? 'delivered' : isFinished(record) ? 'failed' : 'pending'
    const key = `${state}|${record.attempt}|${record.nextAttemptAtMs}`
    const outcome = outcomes.get(key) ?? { state, attempts: record.attempt, next: record.nextAttemptAtMs, ids: [] }
    outcome.ids.push(record.deliveryId)
    outcomes.set(key, outcome)
  }
  for (const { state, attempts, next, ids } of outcomes.values()) {
    await trx
      .updateTable('webhook_messages')
      .set({ state, attempts, next_attempt_at: next, lease_until: null })
      .where('id', 'in', ids)
      .execute()
  }

  // Endpoints: failing-since is written only when it changes, so a healthy endpoint's row is not
  // rewritten on every delivery; all the endpoints that only succeeded share one statement.
  const recovered: string[] = []
  for (const [endpointId, { sawSuccess, failingSince, disable }] of endpointHealth(records)) {
    if (sawSuccess && failingSince === null) recovered.push(endpointId)
    else if (sawSuccess)
      await trx.updateTable('webhook_endpoints').set({ failing_since: failingSince }).where('id', '=', endpointId).execute()
    else
      await trx
        .updateTable('webhook_endpoints')
        .set({ failing_since: failingSince })
        .where('id', '=', endpointId)
        .where('failing_since', 'is', null)
        .execute()
    if (disable) {
      await trx
        .updateTable('webhook_endpoints')
        .set({ enabled: 0, disabled_reason: disable === '410' ? 'gone' : 'failing_for_5_days' })
        .where('id', '=', endpointId)
        .execute()
    }
  }
  if (recovered.length > 0) {
    await trx
      .updateTable('webhook_endpoints')
      .set({ failing_since: null })
      .where('id', 'in', recovered)
      .where('failing_since', 'is not', null)
      .execute()
  }

  const finished = records.filter(isFinished)
  const unknown = [...new Set(finished.map((r) => r.endpointId).filter((id) => !kinds.has(id)))]
  const writebackIds = new Set(finished.filter((r) => kinds.get(r.endpointId) === 'writeback').map((r) => r.endpointId))
  if (unknown.length > 0) {
    const found = await trx
      .selectFrom('webhook_endpoints')
      .select('id')
      .where('kind', '=', 'writeback')
      .where('id', 'in', unknown)
      .execute()
    for (const { id } of found) writebackIds.add(id)
  }
  const outcomesToAnnounce = finished.filter((record) => writebackIds.has(record.endpointId))
  let messages = 0
  for (const record of outcomesToAnnounce) messages += await announceWriteback(trx, record, outbox)
  return messages
}

const isFinished = (record: AttemptRecord) => record.success || record.nextAttemptAtMs === null

/**
 * Per endpoint, in recording order: was there a success, the earliest failure since the last
 * success (the new failing-since), and whether to disable it.
 */
function endpointHealth(records: AttemptRecord[]) {
  const health = new Map<string, { sawSuccess: boolean; failingSince: number | null; disable: AttemptRecord['disable'] }>()
  for (const record of records) {
    const endpoint = health.get(record.endpointId) ?? { sawSuccess: false, failingSince: null, disable: null }
    if (record.success) Object.assign(endpoint, { sawSuccess: true, failingSince: null })
    else endpoint.failingSince ??= record.attemptedAtMs
    endpoint.disable ??= record.disable
    health.set(record.endpointId, endpoint)
  }
  return health
}

/** A writeback's final outcome is itself an event (writeback.completed | writeback.failed). */
async function announceWriteback(trx: Executor, record: AttemptRecord, outbox: Outbox): Promise<number> {
  const outcome = await trx.selectFrom('events').selectAll().where('id', '=', record.eventId).executeTakeFirstOrThrow()
  const { messages } = await outbox.append(trx, [
    {
      type: record.success ? 'writeback.completed' : 'writeback.failed',
      pharmacy_id: outcome.pharmacy_id,
      fleet_id: outcome.fleet_id,
      delivery_id: outcome.delivery_id,
      rx_id: outcome.rx_id,
      data: {
        outcome_event_id: outcome.id,
        outcome: outcome.type,
        attempts: record.attempt,
        status_code: record.statusCode,
        error: record.error,
      },
    },
  ])
  return messages
}
