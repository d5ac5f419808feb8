import type { ServerResponse } from 'node:http'
import type { Context } from 'hono'
import type { StreamHooks } from '../services/events.js'
import type { AppEnv } from './env.js'
import { validationFailed } from '../errors.js'
import { z } from './openapi.js'

/** The OpenAPI answer of a Server-Sent Events route. */
export const eventStreamResponse = (description: string) => ({
  description,
  content: {
    'text/event-stream': {
      schema: z
        .string()
        .describe('`retry: 2000`, then frames `id: <evt_…>`, `event: <type>`, `data: <event JSON>`, and `: heartbeat` comments'),
    },
  },
})

/** Comma-separated event types of a stream's `type` filter. */
export const typeList = z
  .string()
  .max(2_000)
  .optional()
  .transform((text) =>
    text === undefined
      ? undefined
      : text
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean),
  )
  .describe('Comma-separated event types, e.g. `cold-chain.break,delivery.failed`')

/** Where a stream resumes: the Last-Event-ID header (what EventSource sends on reconnecting) or `?after=`. */
export function resumeFrom(c: Context<AppEnv>, after: string | undefined): string | undefined {
  const header = c.req.header('last-event-id')?.trim()
  if (header && !/^[\w-]{1,100}$/.test(header))
    throw validationFailed([{ pointer: '/header/last-event-id', message: 'must be an event id (evt_…)' }])
  return header || after
}

/** The Node response under this request, when served by the Node adapter: a stream cut off closes it, live frames go straight to it. */
export function cutOffHook(c: Context<AppEnv>): StreamHooks {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing
  return outgoing ? { onCutOff: () => outgoing.destroy(), sink: outgoing } : {}
}

/** The SSE answer over a stream of bytes. */
export function sseResponse(body: ReadableStream<Uint8Array>): Response {
  return new Response(body, {
    status: 200,
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'x-accel-buffering': 'no' },
  })
}
