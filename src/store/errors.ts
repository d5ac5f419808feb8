/** A write refused because a row with the same primary or unique key exists, on either engine. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE'
}

// Socket-level failures: the server is down, restarting, or cut off.
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'])
// PostgreSQL SQLSTATEs (Appendix A) of a server that is going away or cannot take the work now:
// class 08 (connection exception) is matched by prefix.
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown: pg_terminate_backend, a restart
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up, or in recovery
  '53300', // too_many_connections
  '57014', // query_canceled: our statement_timeout
  '25P03', // idle_in_transaction_session_timeout
])
// What node-postgres and its pool say when the connection dies or a deadline passes.
const UNAVAILABLE_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|timeout expired|not queryable|Client was closed|Database did not answer/

/** The database (or its disk) cannot serve right now: worth a 503 and a retry, not a 500. */
export function isStoreUnavailable(error: unknown): boolean {
  return causes(error).some((e) => {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || code.startsWith('08'))) return true
    return isDiskFull(e) || (e instanceof Error && UNAVAILABLE_MESSAGE.test(e.message))
  })
}

/** A write refused for lack of space: SQLite's SQLITE_FULL, the OS's ENOSPC, PostgreSQL's disk_full (53100). */
export function isDiskFull(error: unknown): boolean {
  return causes(error).some((e) => {
    const code = (e as { code?: unknown }).code
    return code === 'SQLITE_FULL' || code === 'ENOSPC' || code === '53100'
  })
}

/** The error and the errors it wraps (`cause`), outermost first. */
function causes(error: unknown): object[] {
  const chain: object[] = []
  for (let e = error; e !== null && typeof e === 'object' && chain.length < 5; e = (e as { cause?: unknown }).cause) chain.push(e)
  return chain
}
