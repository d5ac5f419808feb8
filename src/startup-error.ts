/** A start-up failure the operator can act on: its message is one line naming the variable to check. */
export class StartupError extends Error {}

/** The URL without its password, so a start-up line never prints a credential. */
export function withoutPassword(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return url.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@')
  }
}

/**
 * The innermost useful reason of a failure: `fetch failed` and pg's AggregateError hide the
 * socket error (`connect ECONNREFUSED 127.0.0.1:5432`) in `cause` or `errors`.
 */
export function rootCause(error: unknown): string {
  let current: unknown = error
  for (let depth = 0; depth < 5; depth++) {
    const e = current as { cause?: unknown; errors?: unknown[]; message?: string; code?: string }
    if (e?.cause !== undefined) current = e.cause
    else if (Array.isArray(e?.errors) && e.errors.length > 0) current = e.errors[0]
    else break
  }
  const e = current as { message?: string; code?: string } | undefined
  return e?.message || e?.code || String(current)
}

/**
 * Runs one start-up step that reaches an external store; any failure becomes one line naming
 * the variable that chose it, its value (password hidden), the reason, and what to check.
 */
export async function naming<T>(variable: string, value: string, what: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step()
  } catch (error) {
    throw new StartupError(
      `${variable}=${withoutPassword(value)}: cannot reach ${what}: ${rootCause(error)}; check that it is running and reachable from here, or unset ${variable}`,
      { cause: error },
    )
  }
}
