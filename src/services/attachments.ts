import { createHash } from 'node:crypto'
import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { ImageRefused, stripImageMetadata, type ImageType } from '../domain/image-metadata.js'
import { AppError } from '../errors.js'
import { newId } from '../ids.js'
import { toJson, type Executor } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { visibleDelivery } from './delivery-visibility.js'

/** docs/api.md, Proof of delivery: an image is at most 5 MiB, as sent (before its metadata is cut). */
export const ATTACHMENT_MAX_BYTES = 5 * 1024 * 1024
const ATTACHMENT_TYPES: readonly ImageType[] = ['image/jpeg', 'image/png']
/** Images one delivery takes: a photo and a signature per attempt, with room for retakes. */
const MAX_ATTACHMENTS_PER_DELIVERY = 20
// Uploads this process reads and stores at once; the others wait with their bodies unread in the
// socket (TCP flow control holds them), so 20 concurrent 5 MiB uploads cost ~2 × 5 MiB, not 100 MiB.
const UPLOADS_AT_ONCE = 2
// Rows the bytes are stored in: no statement carries a whole image (PostgreSQL's driver sends a
// bytea parameter as hex text, twice its size).
const CHUNK_BYTES = 256 * 1024
/** Deliveries out with a driver: images are taken then, not after the delivery has ended. */
const OPEN_FOR_IMAGES = ['DISPATCHED', 'PICKED_UP', 'FAILED']

export type Attachment = { id: string; sha256: string; content_type: ImageType; size: number; created_at: string }

/**
 * Reads the request's body into `into` (a view of it is the answer), refusing it (413) as soon as it
 * passes `limit` bytes, and (408) when it has not all arrived `withinMs` after the read began.
 */
export type BodyReader = (limit: number, into: Buffer, withinMs: number) => Promise<Buffer>

/** Photos and signature images of a delivery, stored content-addressed in the entity store. */
export class AttachmentService {
  private readonly gate = new Gate(UPLOADS_AT_ONCE)
  // One body buffer per slot of the gate, made once and reused: a new 5 MiB buffer per upload is
  // garbage V8 lets pile up (~64 MB of it) before it collects.
  private readonly buffers: Buffer[] = []

  constructor(
    private readonly deps: ServiceDeps,
    /** UPLOAD_READ_TIMEOUT_S: how long a body may take once read, so a trickle holds a slot no longer. */
    private readonly readTimeoutMs = 60_000,
  ) {}

  /**
   * check the declared type → authorize → (wait for a slot) read at most 5 MiB → read the type from
   * the bytes → cut the metadata → hash → store. `created` is false when this delivery already had
   * the same image (same bytes once stripped): its attachment is answered again.
   */
  async upload(
    principal: Principal,
    deliveryId: string,
    declared: string,
    read: BodyReader,
  ): Promise<{ attachment: Attachment; created: boolean }> {
    const claimed = declaredType(declared)
    await this.uploadable(principal, deliveryId)
    // The image is held from its read until it is stored: the whole of that runs inside the gate.
    return this.gate.run(() => this.readAndStore(principal, deliveryId, claimed, read))
  }

  private async readAndStore(
    principal: Principal,
    deliveryId: string,
    claimed: ImageType,
    read: BodyReader,
  ): Promise<{ attachment: Attachment; created: boolean }> {
    const buffer = this.buffers.pop() ?? Buffer.allocUnsafeSlow(ATTACHMENT_MAX_BYTES)
    try {
      return await this.storeFrom(principal, deliveryId, claimed, await read(ATTACHMENT_MAX_BYTES, buffer, this.readTimeoutMs))
    } finally {
      // Nothing holds a view of it now: the image was stored (copied) or refused.
      this.buffers.push(buffer)
    }
  }

  private async storeFrom(
    principal: Principal,
    deliveryId: string,
    claimed: ImageType,
    bytes: Buffer,
  ): Promise<{ attachment: Attachment; created: boolean }> {
    let image: ReturnType<typeof stripImageMetadata>
    try {
      image = stripImageMetadata(bytes)
    } catch (error) {
      if (!(error instanceof ImageRefused)) throw error
      if (bytes.length === 0) throw new AppError('image_refused', 'The body is empty: send the image’s bytes.')
      throw new AppError('unsupported_media_type', `The body ${error.message}.`)
    }
    if (image.type !== claimed)
      throw new AppError(
        'content_type_mismatch',
        `The body is ${image.type} but was sent as ${claimed}: send it with Content-Type ${image.type}.`,
        {
          content_type_sent: claimed,
          content_type_found: image.type,
        },
      )
    const hash = createHash('sha256')
    for (const part of image.parts) hash.update(part)
    const sha256 = hash.digest('hex')
    const now = iso(this.deps.clock.now())
    return this.deps.db.transaction().execute(async (trx) => {
      await storeBlob(trx, sha256, image.type, image.size, image.parts, now)
      const existing = await trx
        .selectFrom('attachments')
        .selectAll()
        .where('delivery_id', '=', deliveryId)
        .where('sha256', '=', sha256)
        .executeTakeFirst()
      if (existing) return { attachment: toAttachment(existing), created: false }
      const count = await trx
        .selectFrom('attachments')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('delivery_id', '=', deliveryId)
        .executeTakeFirstOrThrow()
      if (Number(count.n) >= MAX_ATTACHMENTS_PER_DELIVERY)
        throw new AppError('limit_exceeded', `A delivery takes at most ${MAX_ATTACHMENTS_PER_DELIVERY} images.`, {
          limit: MAX_ATTACHMENTS_PER_DELIVERY,
        })
      const row = {
        id: newId('at'),
        delivery_id: deliveryId,
        sha256,
        content_type: image.type,
        size: image.size,
        actor: toJson({ client_id: principal.clientId, sub: principal.sub }),
        created_at: now,
      }
      await trx.insertInto('attachments').values(row).execute()
      return { attachment: toAttachment(row), created: true }
    })
  }

  /** The image, chunk by chunk, for whoever may see its delivery (its pharmacy, its fleet, its driver). */
  async open(
    principal: Principal,
    deliveryId: string,
    attachmentId: string,
  ): Promise<{ attachment: Attachment; body: ReadableStream<Uint8Array> }> {
    const delivery = await this.deps.db
      .selectFrom('deliveries')
      .select(['pharmacy_id', 'fleet_id', 'driver_id'])
      .where('id', '=', deliveryId)
      .executeTakeFirst()
    visibleDelivery(principal, delivery)
    const row = await this.deps.db
      .selectFrom('attachments')
      .selectAll()
      .where('id', '=', attachmentId)
      .where('delivery_id', '=', deliveryId)
      .executeTakeFirst()
    if (!row) throw new AppError('not_found', 'attachment not found')
    const blob = await this.deps.db
      .selectFrom('attachment_blobs')
      .select('chunks')
      .where('sha256', '=', row.sha256)
      .executeTakeFirstOrThrow()
    const db = this.deps.db
    let seq = 0
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (seq >= blob.chunks) return controller.close()
        const chunk = await db
          .selectFrom('attachment_chunks')
          .select('bytes')
          .where('sha256', '=', row.sha256)
          .where('seq', '=', seq++)
          .executeTakeFirstOrThrow()
        controller.enqueue(new Uint8Array(chunk.bytes))
      },
    })
    return { attachment: toAttachment(row), body }
  }

  /** Who may add an image: the delivery's fleet (its driver, a dispatcher) or an unrestricted client, while it is out. */
  private async uploadable(principal: Principal, deliveryId: string): Promise<void> {
    const row = await this.deps.db
      .selectFrom('deliveries')
      .select(['pharmacy_id', 'fleet_id', 'driver_id', 'status'])
      .where('id', '=', deliveryId)
      .executeTakeFirst()
    const delivery = visibleDelivery(principal, row)
    if (principal.pharmacyId)
      throw new AppError(
        'insufficient_scope',
        'Proof-of-delivery images are uploaded by the delivery’s fleet (its driver), not by the pharmacy.',
      )
    if (!OPEN_FOR_IMAGES.includes(delivery.status))
      throw new AppError(
        'invalid_transition',
        `Images are uploaded while the delivery is out (${OPEN_FOR_IMAGES.join(', ')}); it is ${delivery.status}.`,
        {
          status_now: delivery.status,
        },
      )
  }
}

function declaredType(header: string): ImageType {
  const type = header.split(';')[0]!.trim().toLowerCase()
  if ((ATTACHMENT_TYPES as readonly string[]).includes(type)) return type as ImageType
  throw new AppError('unsupported_media_type', `Send the image as image/jpeg or image/png (got ${type ? `"${type}"` : 'no content type'}).`)
}

/** The bytes under their hash, once: a second upload of the same image (any delivery) stores nothing more. */
async function storeBlob(trx: Executor, sha256: string, type: ImageType, size: number, parts: Uint8Array[], at: string): Promise<void> {
  const chunks = Math.ceil(size / CHUNK_BYTES)
  const inserted = await trx
    .insertInto('attachment_blobs')
    .values({ sha256, content_type: type, size, chunks, created_at: at })
    .onConflict((oc) => oc.column('sha256').doNothing())
    .executeTakeFirst()
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) return
  let seq = 0
  // One buffer for every chunk: each insert has bound (copied) its bytes once it is awaited.
  const buffer = Buffer.allocUnsafeSlow(Math.min(CHUNK_BYTES, size))
  let chunk = buffer
  let filled = 0
  let left = size
  for (const part of parts) {
    let offset = 0
    while (offset < part.length) {
      const n = Math.min(part.length - offset, chunk.length - filled)
      chunk.set(part.subarray(offset, offset + n), filled)
      filled += n
      offset += n
      if (filled === chunk.length) {
        await trx.insertInto('attachment_chunks').values({ sha256, seq: seq++, bytes: chunk }).execute()
        left -= filled
        chunk = buffer.subarray(0, Math.min(CHUNK_BYTES, left))
        filled = 0
      }
    }
  }
}

function toAttachment(row: { id: string; sha256: string; content_type: string; size: number; created_at: string }): Attachment {
  return { id: row.id, sha256: row.sha256, content_type: row.content_type as ImageType, size: Number(row.size), created_at: row.created_at }
}

/** At most `size` tasks run at once; the others wait their turn, first come first served. */
class Gate {
  private running = 0
  private readonly waiting: (() => void)[] = []
  constructor(private readonly size: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve))
    else this.running++
    try {
      return await task()
    } finally {
      const next = this.waiting.shift()
      if (next) next()
      else this.running--
    }
  }
}
