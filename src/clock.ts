/** The service's only source of "now", so tests can move time. */
export type Clock = { now(): number }

export const systemClock: Clock = { now: () => Date.now() }

export const iso = (ms: number): string => new Date(ms).toISOString()
