import { setTimeout as sleep } from 'node:timers/promises'
import { scenario, type ScenarioName, type SimulatedReading } from './scenarios.js'
import type { SimulatedTote } from './tote.js'

/**
 * Plays a scenario on a tote in real time. The tote's readings carry wall-clock timestamps —
 * the service refuses readings more than 5 minutes ahead of its clock, and a delivery's
 * readings start at its dispatch, which cannot be backdated before the prescription existed —
 * so `speed` compresses the scenario instead: with speed 60 each second of the trip shows a
 * minute of the scenario's curve (and the prescriptions are judged with durations scaled the
 * same way, see setup.ts `profileFor`).
 *
 * Readings that fell due while a publish was waiting for its PUBACK go out together as a
 * batch, as a gateway would send them.
 */
export type PlayOptions = { scenario: ScenarioName; seed: number; startMs: number; rateMs: number; speed: number }

export class TripPlayer {
  private readonly readings: Iterator<SimulatedReading>
  private next: SimulatedReading
  /** Publishes that failed (connection lost past the retry, broker refused); the loop goes on. */
  failures = 0

  constructor(
    private readonly tote: SimulatedTote,
    opts: PlayOptions,
  ) {
    this.readings = scenarioOnWallClock(opts)
    this.next = this.readings.next().value!
  }

  /** Runs until `signal` aborts; resolves then. */
  async play(signal: AbortSignal, onError: (error: Error) => void = () => {}): Promise<void> {
    while (!signal.aborted) {
      const due: SimulatedReading[] = []
      while (this.next.ts <= Date.now()) {
        due.push(this.next)
        this.next = this.readings.next().value!
      }
      if (due.length > 0) {
        try {
          await this.tote.publish(due.length === 1 ? due[0]! : due)
        } catch (error) {
          this.failures++
          onError(error as Error)
        }
        continue
      }
      await sleep(Math.max(this.next.ts - Date.now(), 1), undefined, { signal }).catch(() => {})
    }
  }
}

/** The scenario with its own time compressed `speed` times onto the wall clock from `startMs`. */
export function* scenarioOnWallClock({ scenario: name, seed, startMs, rateMs, speed }: PlayOptions): Generator<SimulatedReading> {
  for (const reading of scenario(name, seed, startMs, rateMs * speed)) {
    yield { ...reading, ts: startMs + Math.round((reading.ts - startMs) / speed) }
  }
}
