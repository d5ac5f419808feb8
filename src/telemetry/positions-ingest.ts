import { PayloadRefusedError } from '../../broker/errors.js'
import type { Clock } from '../clock.js'
import { MAX_POSITIONS_PER_BATCH, positionProblems, type Position } from '../domain/eta.js'
import { AppError } from '../errors.js'
import { parseStrictJson, refusalText } from '../strict-json.js'
import type { DriverPositionService } from '../services/driver-positions.js'

/**
 * A driver's MQTT positions (docs/fleet.md, Live location and ETA): parse → validate → record.
 * The payload is one position `{lat, lng, accuracy_m, at}` or an array of up to 100. A refusal
 * rejects with a `PayloadRefusedError`: acknowledged, its reason on the driver's errors topic.
 */
export function positionsIngest({ positions, clock }: { positions: DriverPositionService; clock: Clock }) {
  // A driver never changes fleet: asked once per driver for the life of the process.
  const fleets = new Map<string, string>()
  return async function onLocation(driverId: string, payload: Buffer): Promise<void> {
    const batch = parsePositions(payload, clock.now())
    let fleetId = fleets.get(driverId)
    if (fleetId === undefined) {
      const found = await positions.fleetOf(driverId)
      if (found === null) throw new PayloadRefusedError('unknown_driver', `driver ${driverId} no longer exists`)
      fleets.set(driverId, (fleetId = found))
    }
    try {
      await positions.record(driverId, fleetId, batch)
    } catch (error) {
      if (error instanceof AppError && error.code === 'not_on_delivery') throw new PayloadRefusedError('not_on_delivery', error.message)
      throw error
    }
  }
}

/** The positions of an MQTT payload, or a `PayloadRefusedError` saying what is wrong with it. */
function parsePositions(payload: Buffer, nowMs: number): Position[] {
  // Refused, not repaired, as a tote's payload is: invalid UTF-8, nesting deeper than 32, a
  // `__proto__`-like member, a lone surrogate or NUL (src/strict-json.ts).
  const parsed = parseStrictJson(payload)
  if (!parsed.ok) throw new PayloadRefusedError('invalid_json', `the payload ${refusalText(parsed)}`)
  const value = parsed.value
  const batch = Array.isArray(value) ? value : [value]
  if (batch.length === 0) throw new PayloadRefusedError('invalid_position', 'an empty array holds no position')
  if (batch.length > MAX_POSITIONS_PER_BATCH)
    throw new PayloadRefusedError('too_many_positions', `at most ${MAX_POSITIONS_PER_BATCH} positions per message, not ${batch.length}`)
  const problems = batch.flatMap((p, i) => positionProblems(p, nowMs, Array.isArray(value) ? `/${i}` : ''))
  if (problems.length > 0) {
    const first = problems[0]!
    const code = first.message.startsWith('is in the future') ? 'position_in_future' : 'invalid_position'
    throw new PayloadRefusedError(code, problems.map((p) => `${p.pointer || '/'} ${p.message}`).join('; '))
  }
  return batch as Position[]
}
