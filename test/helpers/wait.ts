/** Polls `check` until it holds, or fails the test after `timeoutMs`. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/**
 * A fixed wait, for the few tests that prove something does NOT happen (an answer held back, a
 * message not sent): there is no event to wait for, only time for a wrong one to show up. Every
 * caller says what it gives time for. Anything that can be awaited is awaited instead.
 */
export const timeForAWrongAnswer = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
