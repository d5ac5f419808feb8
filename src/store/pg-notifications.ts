import pg from 'pg'

/**
 * PostgreSQL LISTEN on a connection of its own (a pooled one would be handed to other queries),
 * kept open: when it drops, it is opened again after RECONNECT_MS and `onReconnect` is told, since
 * notifications sent meanwhile are lost (PostgreSQL keeps none for a listener that is away).
 */

const RECONNECT_MS = 1_000

export type Listening = {
  /** Resolves once the first LISTEN is in place. */
  ready: Promise<void>
  close(): Promise<void>
}

export function listenPostgres({
  url,
  schema,
  channels,
  onNotification,
  onReconnect = () => {},
  onError = () => {},
}: {
  url: string
  /** The store's schema, when it has its own (search_path as the entity store sets it). */
  schema?: string | undefined
  channels: readonly string[]
  onNotification(channel: string, payload: string): void
  /** The connection was lost and is back: whatever was sent meanwhile was missed. */
  onReconnect?(): void
  onError?(error: Error): void
}): Listening {
  let client: pg.Client | null = null
  let closed = false
  let timer: NodeJS.Timeout | null = null
  let connectedOnce = false

  const connect = async (): Promise<void> => {
    const next = new pg.Client({
      connectionString: url,
      keepAlive: true,
      ...(schema ? { options: `-c search_path="${schema.replace(/"/g, '')}"` } : {}),
    })
    next.on('notification', (n) => onNotification(n.channel, n.payload ?? ''))
    const lost = () => {
      if (client !== next && client !== null) return // an older connection, already replaced
      client = null
      void next.end().catch(() => {})
      reconnectLater()
    }
    next.on('error', (error) => {
      onError(error)
      lost()
    })
    next.on('end', lost)
    await next.connect()
    for (const channel of channels) await next.query(`listen "${channel.replace(/"/g, '')}"`)
    if (closed) return void (await next.end())
    client = next
    if (connectedOnce) onReconnect()
    connectedOnce = true
  }

  const reconnectLater = () => {
    if (closed || timer) return
    timer = setTimeout(() => {
      timer = null
      connect().catch((error: Error) => {
        onError(error)
        reconnectLater()
      })
    }, RECONNECT_MS)
    timer.unref()
  }

  return {
    ready: connect(),
    async close() {
      closed = true
      if (timer) clearTimeout(timer)
      await client?.end().catch(() => {})
      client = null
    },
  }
}

/** A channel name for this store: notifications are per database, so the schema keeps two stores on one database apart. */
export function channelOf(kind: string, schema: string): string {
  return `rx_${kind}_${schema}`.slice(0, 63) // NAMEDATALEN - 1
}
