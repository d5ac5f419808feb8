import { randomInt, timingSafeEqual } from 'node:crypto'
import { AppError } from '../errors.js'
import { sealingContext } from '../store/sealed-secrets.js'
import type { SecretBox } from '../store/secret-box.js'
import type { Executor } from '../store/schema.js'

/**
 * The PIN of a delivery that requires one (docs/api.md, Proof of delivery): issued at dispatch,
 * shown only on the patient's tracking page, told by the patient to the driver and compared here.
 * Stored sealed under SECRETS_KEY (sealed-secrets.ts lists the column), never answered to the
 * driver, never in a log, an event, an audit record or an idempotency record.
 */

/** 6 digits: with MAX_WRONG_TRIES guesses, one chance in 200,000 of guessing it. */
const PIN_DIGITS = 6
/** Wrong PINs a delivery takes; the last one locks it (409 pin_locked): the driver may still fail or return it. */
const MAX_WRONG_TRIES = 5
/** A delivery in one of these states has ended: its PIN is no longer shown. */
const ENDED = ['DELIVERED', 'RETURNED', 'CANCELLED']

const contextOf = (deliveryId: string) => sealingContext('delivery_pins', deliveryId)

/** The delivery PINs of one store, sealed and opened with that store's SecretBox. */
export class DeliveryPins {
  constructor(private readonly box: SecretBox) {}

  /** A new PIN for the delivery, sealed, in the dispatch's transaction. */
  async issue(trx: Executor, deliveryId: string, issuedAt: string): Promise<void> {
    const pin = String(randomInt(0, 10 ** PIN_DIGITS)).padStart(PIN_DIGITS, '0')
    const sealed = this.box.seal(contextOf(deliveryId), pin)
    await trx
      .insertInto('delivery_pins')
      .values({ delivery_id: deliveryId, pin: sealed, locked_at: null, issued_at: issuedAt })
      .onConflict((oc) => oc.column('delivery_id').doUpdateSet({ pin: sealed, wrong_tries: 0, locked_at: null, issued_at: issuedAt }))
      .execute()
  }

  /**
   * The delivery's PIN in clear, for the patient's tracking page; null when the delivery requires
   * none, or has ended (delivered, returned or cancelled).
   */
  async reveal(db: Executor, deliveryId: string): Promise<string | null> {
    const row = await db
      .selectFrom('delivery_pins')
      .innerJoin('deliveries', 'deliveries.id', 'delivery_pins.delivery_id')
      .select(['delivery_pins.pin', 'deliveries.status'])
      .where('delivery_pins.delivery_id', '=', deliveryId)
      .executeTakeFirst()
    if (!row || ENDED.includes(row.status)) return null
    return this.box.open(contextOf(deliveryId), row.pin)
  }

  /**
   * Compares the PIN a driver sends. A wrong one is counted in its own statement (so it stays
   * counted though the `deliver` fails) and answered 422 with the tries left; the MAX_WRONG_TRIES-th
   * locks the delivery's PIN, and from then on every `deliver` is 409 `pin_locked`.
   */
  async check(db: Executor, deliveryId: string, given: string, at: string): Promise<void> {
    const row = await db.selectFrom('delivery_pins').selectAll().where('delivery_id', '=', deliveryId).executeTakeFirst()
    if (!row) throw pinUnmet('no PIN was issued for this delivery (it was dispatched before PINs were required)')
    if (row.locked_at) throw pinLocked()
    const expected = Buffer.from(this.box.open(contextOf(deliveryId), row.pin))
    const sent = Buffer.from(given)
    if (sent.length === expected.length && timingSafeEqual(sent, expected)) return
    // Counted atomically: copies of the service racing on the same delivery each add one.
    await db
      .updateTable('delivery_pins')
      .set((eb) => ({
        wrong_tries: eb('wrong_tries', '+', 1),
        locked_at: eb
          .case()
          .when('wrong_tries', '>=', MAX_WRONG_TRIES - 1)
          .then(at)
          .else(null)
          .end(),
      }))
      .where('delivery_id', '=', deliveryId)
      .where('locked_at', 'is', null)
      .execute()
    const after = await db
      .selectFrom('delivery_pins')
      .select(['wrong_tries', 'locked_at'])
      .where('delivery_id', '=', deliveryId)
      .executeTakeFirst()
    if (!after || after.locked_at) throw pinLocked()
    const left = MAX_WRONG_TRIES - after.wrong_tries
    throw pinUnmet(`is not the PIN issued for this delivery: ${left} ${left === 1 ? 'try' : 'tries'} left`, left)
  }
}

const pinUnmet = (message: string, left?: number) =>
  new AppError('pod_requirements_unmet', 'The delivery lacks a proof it requires, or one does not hold.', {
    unmet: [{ proof: 'pin', pointer: '/proof/pin', message }],
    missing: ['pin'],
    ...(left !== undefined ? { pin_tries_left: left } : {}),
  })

const pinLocked = () =>
  new AppError(
    'pin_locked',
    `${MAX_WRONG_TRIES} wrong PINs were sent for this delivery: it can no longer be delivered; fail it or return it to the pharmacy.`,
    { allowed_actions: ['fail', 'return'] },
  )
