import { sql } from 'kysely'
import type { Logger } from 'pino'
import { channelOf, listenPostgres, type Listening } from '../store/pg-notifications.js'
import type { Db } from '../store/schema.js'
import type { ReadingRow, ReadingSink } from '../timeseries/sink.js'

/**
 * What copies of the service on one PostgreSQL tell each other, over LISTEN/NOTIFY on two
 * channels of the store's schema:
 *
 * - `readings`: the readings a copy stored for a delivery another copy evaluates (it holds the
 *   delivery's lease, telemetry/evaluation-leases.ts). Sent with the write, before the PUBACK:
 *   in the insert's own transaction on the PostgreSQL sink (announced if and only if stored), right
 *   after the write on another sink (a failed NOTIFY fails the publish, and the tote's re-send is
 *   forwarded again). The evaluator judges them as its own (ColdChainMonitor.acceptForwarded).
 * - `bindings`: a dispatch or an end recorded by one copy. The others drop the tote's cached
 *   intervals at once (instead of up to 2 s later), attribute the readings they stored meanwhile
 *   with the old interval, and the delivery's evaluator rebuilds its state.
 *
 * A payload names its sender, which ignores its own. NOTIFY payloads are limited to 8,000 bytes:
 * readings go as compact arrays, PAYLOAD_BYTES per notification.
 */

const PAYLOAD_BYTES = 7_000

export type SharedStoreHandlers = {
  readings(rows: ReadingRow[]): void
  binding(toteId: string, deliveryId: string): void
  /** The listening connection dropped and is back: notifications sent meanwhile were missed. */
  missed(): void
}

export async function sharedStoreWiring({
  db,
  url,
  schema,
  holder,
  logger,
  isRemote,
}: {
  db: Db
  url: string
  schema: string | undefined
  holder: string
  logger: Logger
  /** Whether another copy evaluates this delivery (ColdChainMonitor.isRemote). */
  isRemote(deliveryId: string): boolean
}) {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db)
  const storeSchema = rows[0]!.schema
  const channels = { readings: channelOf('readings', storeSchema), bindings: channelOf('bindings', storeSchema) }
  let listening: Listening | null = null

  const payloads = (batch: readonly ReadingRow[]): string[] => {
    const out: string[] = []
    let parts: string[] = []
    let size = 0
    for (const r of batch) {
      if (r.delivery_id === null || !isRemote(r.delivery_id)) continue
      const part = JSON.stringify([
        r.tote_id,
        r.delivery_id,
        r.rx_id,
        r.ts,
        r.temp_c,
        r.battery,
        r.humidity,
        r.lat,
        r.lng,
        r.seq,
        r.received_at,
        r.late,
      ])
      if (size + part.length > PAYLOAD_BYTES && parts.length) {
        out.push(`${holder}\n[${parts.join(',')}]`)
        parts = []
        size = 0
      }
      parts.push(part)
      size += part.length + 1
    }
    if (parts.length) out.push(`${holder}\n[${parts.join(',')}]`)
    return out
  }

  const notify = async (channel: string, messages: readonly string[]) => {
    if (messages.length) await sql`select pg_notify(${channel}, m) from unnest(${[...messages]}::text[]) as m`.execute(db)
  }

  const onNotification = (handlers: SharedStoreHandlers) => (channel: string, payload: string) => {
    const newline = payload.indexOf('\n')
    if (newline < 0 || payload.slice(0, newline) === holder) return
    try {
      const body = JSON.parse(payload.slice(newline + 1)) as unknown
      if (channel === channels.readings) handlers.readings((body as unknown[][]).map(rowOf))
      else if (channel === channels.bindings) {
        const { toteId, deliveryId } = body as { toteId: string; deliveryId: string }
        handlers.binding(toteId, deliveryId)
      }
    } catch (err) {
      logger.warn({ err, channel }, 'a notification from another copy could not be read')
    }
  }

  return {
    forward: { channel: channels.readings, payloads },
    /** `sink` with its writes forwarded after they are stored, for sinks other than PostgreSQL's. */
    forwardingAfter(sink: ReadingSink): ReadingSink {
      return {
        ...sink,
        write: async (batch) => {
          await sink.write(batch)
          await notify(channels.readings, payloads(batch))
        },
      }
    },
    announceBinding(toteId: string, deliveryId: string): void {
      notify(channels.bindings, [`${holder}\n${JSON.stringify({ toteId, deliveryId })}`]).catch((err: unknown) =>
        logger.warn({ err, tote_id: toteId }, 'announcing a binding to the other copies failed; they see it within 2 s'),
      )
    },
    async listen(handlers: SharedStoreHandlers): Promise<void> {
      listening = listenPostgres({
        url,
        schema,
        channels: [channels.readings, channels.bindings],
        onNotification: onNotification(handlers),
        onReconnect: () => handlers.missed(),
        onError: (err) => logger.warn({ err }, 'listening to the other copies: connection lost'),
      })
      await listening.ready
    },
    async close(): Promise<void> {
      await listening?.close()
    },
  }
}

function rowOf(v: unknown[]): ReadingRow {
  return {
    tote_id: v[0] as string,
    delivery_id: v[1] as string | null,
    rx_id: v[2] as string | null,
    ts: v[3] as number,
    temp_c: v[4] as number,
    battery: v[5] as number | null,
    humidity: v[6] as number | null,
    lat: v[7] as number | null,
    lng: v[8] as number | null,
    seq: v[9] as number | null,
    received_at: v[10] as number,
    late: v[11] as boolean,
  }
}
