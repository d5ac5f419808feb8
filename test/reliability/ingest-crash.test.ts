import { afterEach, describe, expect, it } from 'vitest'
import { replay, resolveProfile, type RuleEvent } from '../../rules/index.js'
import { startChildService, type ChildService } from '../helpers/child-service.js'
import { waitFor } from '../helpers/wait.js'
import {
  closed,
  connectTote,
  dispatchedColdChain,
  firstUnacked,
  publishUnits,
  readingsTopicOf,
  storedEvents,
  storedTimestamps,
  toUnits,
  unitOf,
} from './fixtures.js'

/**
 * SIGKILL in the middle of a QoS 1 stream (SPEC §1 "Nothing acknowledged is lost", §4 "QoS 1
 * means durable", §5 events once per key). A tote streams 20,000 readings; the service is
 * killed right after the PUBACK of the reading that reveals an excursion, restarted on the same
 * DATA_DIR, killed again right after the PUBACK of the reading that reveals the break, restarted,
 * and the tote finishes the stream, re-sending from its first unacknowledged publish as a
 * reconnecting MQTT client does.
 */

// The refrigerated band (2–8 °C, hard minimum 0 °C) with grace and excursion limit scaled down
// 15x and 30x: the binding starts at dispatch (occurred_at may not precede the prescription) and
// readings may be at most 5 minutes ahead of the server, so a whole stream spans < 300 s of event
// time — the built-in 300 s grace would not fit one excursion in it.
const PROFILE = {
  name: 'refrigerated-fast',
  min_c: 2,
  max_c: 8,
  grace_s: 20,
  max_excursion_s: 60,
  max_cumulative_s: 3_600,
  hard_min_c: 0,
  hard_max_c: null,
  mkt_max_c: null,
  max_gap_s: 900,
}
const READINGS = 20_000
/** 20,000 readings 12 ms apart: 240 s of event time, ending 4 minutes after dispatch. */
const STEP_MS = 12
/** Unacknowledged publishes at once: ≤ 16 × 100 readings ≈ 19 s of event time, less than the 30 s reorder window. */
const WINDOW = 16

/** 5 °C, then 10 °C for 30 s (excursion), 1 °C for 30 s (excursion), then 12 °C for 110 s (excursion, then too long: break). */
function temperatureAt(offsetS: number): number {
  if (offsetS < 30) return 5
  if (offsetS < 60) return 10
  if (offsetS < 80) return 5
  if (offsetS < 110) return 1
  if (offsetS < 130) return 5
  return 12
}

const children: ChildService[] = []
afterEach(async () => {
  for (const child of children.splice(0)) await child.dispose()
})

/** An event as a line to compare: type, the interval it is about, the break's reason. */
const describeEvent = ({ type, data }: { type: string; data: object }) => {
  const d = data as { excursion_started_at?: string; offline_since?: string; reason?: string }
  return [type, d.excursion_started_at ?? d.offline_since ?? '', d.reason ?? ''].join(' ')
}

const ruleEvent = (type: string) => type.startsWith('temperature.') || type.startsWith('cold-chain.') || type.startsWith('sensor.')

/** Where a kill lands: on the PUBACK of the unit that reveals an event, or a few ms after sending it alone to an idle service. */
type KillAt = { kind: 'ack' } | { kind: 'in-flight'; delayMs: number }

describe('a QoS 1 stream across SIGKILL and restarts', () => {
  for (const { windowS, kills, what } of [
    {
      // The reading that reveals each event is acknowledged but still held by the 30 s reorder
      // window when the kill lands: the event cannot be in the outbox yet, so the restart must raise it.
      windowS: '30',
      kills: [{ kind: 'ack' }, { kind: 'ack' }] as KillAt[],
      what: 'killed right after the PUBACK of the readings that reveal an excursion, then the break (not yet evaluated)',
    },
    {
      // No window: the event is evaluated before the PUBACK and normally written by the time the
      // kill lands, so the restart's replay raises it again and the outbox must drop the copy. The
      // second kill lands inside the processing of the break's publish (3 ms measured here: after
      // its commit, before its PUBACK or its event; elsewhere on slower or faster machines).
      windowS: '0',
      kills: [{ kind: 'ack' }, { kind: 'in-flight', delayMs: 3 }] as KillAt[],
      what: 'killed after the excursion was evaluated, then while the break publish is being stored',
    },
  ]) {
    it(`loses no acknowledged reading and emits each excursion and the break exactly once (REORDER_WINDOW_S=${windowS}: ${what})`, async ({
      annotate,
    }) => {
      let svc = await startChildService({ env: { REORDER_WINDOW_S: windowS } })
      children.push(svc)
      let token = await svc.adminToken()
      const { tote, deliveryId, dispatchedAt } = await dispatchedColdChain(svc, token, PROFILE)
      const readings = Array.from({ length: READINGS }, (_, i) => {
        const ts = dispatchedAt + (i + 1) * STEP_MS
        return { ts, temp_c: temperatureAt((ts - dispatchedAt) / 1_000) }
      })

      // What in-order evaluation of the whole stream gives: the pure engine is the oracle.
      const expected = replay(resolveProfile(PROFILE), dispatchedAt, readings).events
      const excursions = expected.filter((e) => e.type === 'temperature.excursion')
      const brk = expected.find((e) => e.type === 'cold-chain.break')!
      expect(excursions).toHaveLength(3)
      expect(brk.data).toMatchObject({ reason: 'excursion_too_long' })

      const units = toUnits(readings, 20_261_122)
      const revealing = (event: RuleEvent) => readings.findIndex((r) => r.ts > event.at)
      const crashes = [excursions[1]!, brk].map((event, k) => ({
        event,
        reading: revealing(event),
        unit: unitOf(units, revealing(event)),
        killAt: kills[k]!,
      }))
      const acked: boolean[] = []
      const topic = readingsTopicOf(tote.id)
      const ackedTimestamps = () => units.flatMap((u, k) => (acked[k] ? readings.slice(u.first, u.first + u.count).map((r) => r.ts) : []))

      for (const crash of crashes) {
        const client = await connectTote(svc, tote)
        const pid = svc.pid
        await publishUnits(client, topic, units, {
          from: firstUnacked(acked, units.length),
          window: WINDOW,
          acked,
          ...(crash.killAt.kind === 'ack'
            ? {
                onAck: (u: number) => {
                  if (u < crash.unit) return
                  process.kill(pid, 'SIGKILL')
                  return 'stop' as const
                },
              }
            : {
                alone: crash.unit,
                onSend: (u: number) => {
                  if (u < crash.unit) return
                  setTimeout(() => process.kill(pid, 'SIGKILL'), crash.killAt.kind === 'in-flight' ? crash.killAt.delayMs : 0)
                  return 'stop' as const
                },
              }),
        })
        await closed(client)
        client.end(true)
        expect(await svc.exited).toMatchObject({ signal: 'SIGKILL' })

        // (a) Every reading whose PUBACK arrived is in the store.
        const stored = storedTimestamps(svc.dataDir, tote.id)
        const lost = ackedTimestamps().filter((ts) => !stored.has(ts))
        expect(lost, `acknowledged readings missing after SIGKILL at unit ${crash.unit}`).toEqual([])
        // Where the kill landed.
        const eventWritten = storedEvents(svc.dataDir, deliveryId).some((e) => e.dedupe_key === crash.event.key)
        const landed =
          `${crash.event.type} (reading ${crash.reading}, publish ${crash.unit}/${units.length}): ` +
          `revealing reading ${acked[crash.unit] ? 'acknowledged' : stored.has(readings[crash.reading]!.ts) ? 'stored, not acknowledged' : 'not stored'}, ` +
          `event ${eventWritten ? 'already' : 'not yet'} in the outbox; ${stored.size} readings stored`
        await annotate(`SIGKILL landed at ${landed}`)
        if (windowS === '30') expect(eventWritten, landed).toBe(false)

        svc = await svc.restart()
        children.push(svc)
      }

      // The tote reconnects and re-sends from its first unacknowledged publish to the end.
      token = await svc.adminToken()
      const client = await connectTote(svc, tote)
      await publishUnits(client, topic, units, { from: firstUnacked(acked, units.length), window: WINDOW, acked })
      await client.endAsync()
      expect(firstUnacked(acked, units.length)).toBe(units.length)

      // (b) Exactly the events of an uninterrupted in-order run: none missed, none doubled.
      const ruleEvents = async () => {
        const res = await svc.get<{ data: { type: string; data: Record<string, unknown> }[] }>(
          `/v1/events?delivery_id=${deliveryId}&limit=100`,
          token,
        )
        expect(res.status, res.text).toBe(200)
        return res.body.data.filter((e) => ruleEvent(e.type))
      }
      await waitFor(async () => (await ruleEvents()).length >= expected.length, 10_000, 'the rule events of the whole stream')
      const got = await ruleEvents()
      expect(got.map(describeEvent).sort()).toEqual(expected.map(describeEvent).sort())
      expect(got.filter((e) => e.type === 'temperature.excursion')).toHaveLength(3)
      const breaks = got.filter((e) => e.type === 'cold-chain.break')
      expect(breaks).toHaveLength(1)
      expect(breaks[0]!.data).toMatchObject({ reason: 'excursion_too_long', broken_at: brk.data.broken_at })

      const delivery = await svc.get(`/v1/deliveries/${deliveryId}`, token)
      expect(delivery.body.cold_chain).toMatchObject({ state: 'BROKEN', break_reason: 'excursion_too_long', broken_at: brk.data.broken_at })

      // A graceful stop judges whatever the reorder window still held: still nothing doubled, nothing lost.
      expect(await svc.kill('SIGTERM')).toEqual({ code: 0, signal: null })
      const outbox = storedEvents(svc.dataDir, deliveryId).filter((e) => ruleEvent(e.type))
      expect(outbox.map((e) => e.dedupe_key).sort()).toEqual(expected.map((e) => e.key).sort())
      expect(storedTimestamps(svc.dataDir, tote.id).size).toBe(READINGS)
    }, 120_000)
  }
})
