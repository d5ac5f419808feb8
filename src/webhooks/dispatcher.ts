import { setMaxListeners } from 'node:events'
import PQueue from 'p-queue'
import { attemptDelivery, type AttemptDeps, type DispatcherLogger } from './attempt.js'
import type { AttemptRecord, DeliveryQueue, PendingDelivery } from './delivery-queue.js'
import { createAgentPool, DEFAULT_TIMEOUT_MS, type AgentPool } from './http-sender.js'
import { createRetryAlarm } from './retry-alarm.js'
import { DEFAULT_RETRY_SCHEDULE_MS } from './retry-policy.js'

export interface DispatcherOptions {
  queue: DeliveryQueue
  /** `WEBHOOK_ALLOW_PRIVATE`. */
  allowPrivate: boolean
  /** `WEBHOOK_RETRY_SCHEDULE`, parsed. Default: the schedule in src/webhooks/README.md. */
  retrySchedule?: readonly number[]
  /** 10 s (src/webhooks/README.md, Guarantees). */
  timeoutMs?: number
  /** Attempts in flight per endpoint (bounded per endpoint). A slow endpoint ties up only these. */
  perEndpointConcurrency?: number
  /** Deliveries held by this process at once (sending or waiting for their endpoint's slot). */
  maxInFlight?: number
  /**
   * How often to look for due rows when nobody calls `wake()`: retries recorded by other
   * processes, or further away than a minute (this process's nearer retries wake it on time).
   */
  pollIntervalMs?: number
  agents?: AgentPool
  clock?: () => number
  random?: () => number
  /** Called after each recorded attempt, e.g. for the `webhook attempts by outcome` metric. */
  onAttempt?: (record: AttemptRecord) => void
  logger?: DispatcherLogger
  /** The service's Ed25519 keys, which sign for `v1a` endpoints. */
  webhookKeys?: AttemptDeps['webhookKeys']
}

/** Single use: once stopped, build a new one. */
export interface WebhookDispatcher {
  start(): void
  /** New events were committed: look for due deliveries now rather than at the next poll. */
  wake(): void
  /** Stop claiming; wait up to `graceMs` for attempts in flight, then abort them. */
  stop(graceMs?: number): Promise<void>
}

/**
 * Margin on top of the worst case a claimed row can take here (waiting behind one wave of
 * its endpoint's attempts, then its own attempt), for recording and clock skew between nodes.
 */
const LEASE_MARGIN_MS = 60_000
/**
 * Wake-ups (commits, polls, retries coming due) claim at most this share of the time. A claim
 * is cheap while little is due, but with a backlog on saturated endpoints it must read past
 * their rows to find anyone else's, and one claim per commit would then starve the attempts
 * that shrink the backlog. After a claim that took d ms, the next wake-up claims no sooner
 * than 3d ms later: 1 ms → 3 ms of added latency, a 40 ms scan → 120 ms.
 */
const WAKE_CLAIM_DUTY = 0.25

const silentLogger: DispatcherLogger = { warn() {}, error() {} }

interface EndpointLane {
  queue: PQueue
  held: number
}

export function createDispatcher({
  queue,
  allowPrivate,
  retrySchedule = DEFAULT_RETRY_SCHEDULE_MS,
  timeoutMs = DEFAULT_TIMEOUT_MS,
  perEndpointConcurrency = 10,
  maxInFlight = 200,
  pollIntervalMs = 1_000,
  agents,
  clock = Date.now,
  random = Math.random,
  onAttempt,
  logger = silentLogger,
  webhookKeys,
}: DispatcherOptions): WebhookDispatcher {
  const pool = agents ?? createAgentPool()
  const lanes = new Map<string, EndpointLane>()
  const aborter = new AbortController()
  // Every attempt in flight listens for shutdown on this one signal.
  setMaxListeners(0, aborter.signal)
  // A row waits behind at most one wave of its endpoint's attempts (see `claimMore`).
  const leaseMs = 2 * timeoutMs + LEASE_MARGIN_MS
  const laneLowWater = Math.floor(perEndpointConcurrency / 2)
  const globalLowWater = Math.floor(maxInFlight / 2)
  let held = 0
  let running = false
  let stopped = false
  let claiming = false
  let claimAgain = false
  let wokenWhileClaiming = false
  let pacedUntil = 0 // performance.now() before which a wake-up waits (WAKE_CLAIM_DUTY)
  let pacedWake: NodeJS.Timeout | undefined
  let backlog = false
  let poller: NodeJS.Timeout | undefined
  let idleWaiters: Array<() => void> = []
  const retryAlarm = createRetryAlarm({ onDue: () => wakeUp(), clock })
  const attemptDeps: AttemptDeps = {
    queue,
    allowPrivate,
    retrySchedule,
    timeoutMs,
    agentFor: pool.agentFor,
    signal: aborter.signal,
    clock,
    random,
    logger,
    webhookKeys,
  }

  /** Something may have come due (a commit, the poll, a retry): claim, paced by WAKE_CLAIM_DUTY. */
  function wakeUp(): void {
    if (!running) return
    if (claiming) {
      wokenWhileClaiming = true
      return
    }
    const wait = pacedUntil - performance.now()
    if (wait <= 0) return void claimMore()
    pacedWake ??= setTimeout(() => {
      pacedWake = undefined
      void claimMore()
    }, wait)
  }

  /** Claims due rows while there is room; single-flight, re-run when asked again meanwhile. */
  async function claimMore(): Promise<void> {
    if (!running) return
    if (claiming) {
      claimAgain = true
      return
    }
    claiming = true
    try {
      do {
        claimAgain = false
        const room = maxInFlight - held
        if (room <= 0) {
          backlog = true
          break
        }
        // Endpoints holding a full wave are skipped and the others get at most one more wave,
        // so a lane holds < 2 waves (a row waits behind at most one: see `leaseMs`) and a
        // slow endpoint cannot take the room others need.
        const saturated = [...lanes].filter(([, lane]) => lane.held >= perEndpointConcurrency).map(([id]) => id)
        const nowMs = clock()
        const claimStarted = performance.now()
        const rows = await queue.claimDue({
          nowMs,
          limit: room,
          perEndpointLimit: perEndpointConcurrency,
          excludeEndpointIds: saturated,
          leaseUntilMs: nowMs + leaseMs,
        })
        pacedUntil = performance.now() + (performance.now() - claimStarted) * (1 / WAKE_CLAIM_DUTY - 1)
        for (const row of rows) hold(row)
        // More may be due when we hit a limit: the overall one (claim again now) or a
        // per-endpoint one (claim again as that endpoint's attempts complete).
        const full = rows.length >= room
        backlog = full || saturated.length > 0 || rows.some((row) => (lanes.get(row.endpointId)?.held ?? 0) >= perEndpointConcurrency)
        if (full) claimAgain = true
      } while (claimAgain && running)
    } catch (err) {
      logger.error({ err }, 'webhook dispatcher: claiming due deliveries failed; retrying at the next poll')
    } finally {
      claiming = false
    }
    if (wokenWhileClaiming) {
      wokenWhileClaiming = false
      wakeUp()
    }
  }

  function hold(row: PendingDelivery): void {
    let lane = lanes.get(row.endpointId)
    if (!lane) {
      lane = { queue: new PQueue({ concurrency: perEndpointConcurrency }), held: 0 }
      lanes.set(row.endpointId, lane)
    }
    const current = lane
    current.held++
    held++
    void current.queue
      .add(() => attempt(row))
      .finally(() => {
        current.held--
        held--
        if (current.held === 0) lanes.delete(row.endpointId)
        if (held === 0) for (const resolve of idleWaiters.splice(0)) resolve()
        // Refill at half-empty rather than after every attempt: one claim (a write
        // transaction in storage) then serves many attempts.
        if (backlog && (current.held === laneLowWater || held === globalLowWater)) void claimMore()
      })
  }
  /** One attempt (attempt.ts), then a retry alarm for when it comes due. */
  async function attempt(row: PendingDelivery): Promise<void> {
    if (!running) return // stopping: leave the row to its lease
    const record = await attemptDelivery(row, attemptDeps)
    if (!record) return // outcome unknown: leave the row to its lease
    if (record.nextAttemptAtMs !== null) retryAlarm.add(record.nextAttemptAtMs)
    onAttempt?.(record)
  }

  function whenIdle(): Promise<void> {
    return held === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve))
  }

  return {
    start() {
      if (stopped) throw new Error('webhook dispatcher: already stopped; create a new one')
      if (running) return
      running = true
      poller = setInterval(wakeUp, pollIntervalMs)
      poller.unref()
      void claimMore()
    },
    wake() {
      wakeUp()
    },
    async stop(graceMs = 5_000) {
      if (stopped) return
      stopped = true
      running = false
      clearInterval(poller)
      clearTimeout(pacedWake)
      retryAlarm.stop()
      let timer: NodeJS.Timeout | undefined
      const graceOver = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs)
      })
      await Promise.race([whenIdle(), graceOver])
      clearTimeout(timer)
      aborter.abort()
      await whenIdle()
      idleWaiters = []
      if (!agents) pool.destroy()
    },
  }
}
