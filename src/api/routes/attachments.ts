import { OpenAPIHono } from '@hono/zod-openapi'
import { AppError } from '../../errors.js'
import { ATTACHMENT_MAX_BYTES, type AttachmentService } from '../../services/attachments.js'
import type { AppEnv } from '../env.js'
import { readBodyWithin, type OtherBody } from '../middleware/body-guard.js'
import { json, problem, v1Route, z } from '../openapi.js'

/** The body-guard leaves this body unread: the route reads it itself, at most 5 MiB, when its turn comes. */
export const attachmentBody: OtherBody = {
  method: 'POST',
  path: /^\/v1\/deliveries\/[^/]+\/attachments$/,
  maxBytes: ATTACHMENT_MAX_BYTES,
  types: /^image\/(jpeg|png)$/i,
  streamed: true,
}

// RFC 9112 §9.6: a refusal sent before the body was read closes the connection.
const closeAfterReply = { Connection: 'close' }

const Attachment = z
  .object({
    id: z.string().describe('at_…: name it in `deliver`’s proof'),
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .describe('Lowercase hex SHA-256 of the stored bytes (metadata cut): the custody event’s evidence names it'),
    content_type: z.enum(['image/jpeg', 'image/png']).describe('As read from the bytes'),
    size: z.number().int().describe('Bytes stored, after the metadata was cut'),
    created_at: z.string(),
  })
  .openapi('Attachment')

const params = z.object({
  id: z
    .string()
    .min(3)
    .max(64)
    .openapi({ param: { name: 'id', in: 'path' }, example: 'dl_01jd0000000000000000000000' }),
})
const attachmentParams = params.extend({
  attachment_id: z
    .string()
    .min(3)
    .max(64)
    .openapi({ param: { name: 'attachment_id', in: 'path' }, example: 'at_01jd0000000000000000000000' }),
})

const imageBody = {
  body: {
    required: true,
    description: 'The image’s bytes, at most 5 MiB, with its Content-Type; its type is read from the bytes',
    content: {
      'image/jpeg': { schema: z.string().openapi({ format: 'binary' }) },
      'image/png': { schema: z.string().openapi({ format: 'binary' }) },
    },
  },
}

export function attachmentRoutes(attachments: AttachmentService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('custody:write', {
      method: 'post',
      path: '/v1/deliveries/{id}/attachments',
      operationId: 'uploadAttachment',
      tags: ['Deliveries'],
      summary: 'Upload a proof-of-delivery photo or signature image',
      description:
        'The body is the raw image (image/jpeg or image/png, read from its bytes, at most 5 MiB). Location and other metadata (JPEG APP1 Exif/XMP, COM; PNG eXIf, tEXt, zTXt, iTXt, tIME) are cut before it is hashed and stored. The same image uploaded again for the same delivery answers the same attachment (200). By the delivery’s fleet (its driver, a dispatcher) while it is out.',
      request: { params, ...imageBody },
      responses: {
        201: json(Attachment, 'Stored'),
        200: json(Attachment, 'This delivery already had this image'),
        409: problem('`invalid_transition`: the delivery is not out (DISPATCHED, PICKED_UP or FAILED); `limit_exceeded`: it has 20 images'),
        408: problem('`body_too_slow`: the image had not all arrived UPLOAD_READ_TIMEOUT_S (60) seconds after its read began'),
        413: problem('`payload_too_large`: over 5 MiB, declared or sent'),
        415: problem('`unsupported_media_type`: not sent as image/jpeg or image/png, or its bytes are neither'),
        422: problem('`content_type_mismatch`: the bytes are the other of the two types; `image_refused`: an empty body'),
      },
    }),
    async (c) => {
      let read = false
      try {
        const { attachment, created } = await attachments.upload(
          c.get('principal'),
          c.req.valid('param').id,
          c.req.header('content-type') ?? '',
          (limit, into, withinMs) => {
            read = true
            return readBodyWithin(c, limit, tooLarge, into, withinMs).then((bytes) => bytes ?? Buffer.alloc(0))
          },
        )
        return c.json(attachment, created ? 201 : 200)
      } catch (error) {
        if (!read && error instanceof AppError)
          throw new AppError(error.code, error.message, error.extra, { ...error.headers, ...closeAfterReply })
        throw error
      }
    },
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/deliveries/{id}/attachments/{attachment_id}',
      operationId: 'getAttachment',
      tags: ['Deliveries'],
      summary: 'Download a proof-of-delivery image',
      description:
        'Served as a download (`Content-Disposition: attachment`, `X-Content-Type-Options: nosniff`), to whoever may see the delivery.',
      request: { params: attachmentParams },
      responses: {
        200: {
          description: 'The image as stored',
          content: {
            'image/jpeg': { schema: z.string().openapi({ format: 'binary' }) },
            'image/png': { schema: z.string().openapi({ format: 'binary' }) },
          },
        },
      },
    }),
    async (c) => {
      const { id, attachment_id } = c.req.valid('param')
      const { attachment, body } = await attachments.open(c.get('principal'), id, attachment_id)
      const extension = attachment.content_type === 'image/png' ? 'png' : 'jpg'
      return c.body(body, 200, {
        'content-type': attachment.content_type,
        'content-length': String(attachment.size),
        'content-disposition': `attachment; filename="${attachment.id}.${extension}"`,
        'x-content-type-options': 'nosniff',
        etag: `"${attachment.sha256}"`,
      })
    },
  )
  return app
}

const tooLarge = () =>
  new AppError(
    'payload_too_large',
    `The image is larger than ${ATTACHMENT_MAX_BYTES / 1024 / 1024} MiB.`,
    { limit_bytes: ATTACHMENT_MAX_BYTES },
    closeAfterReply,
  )
