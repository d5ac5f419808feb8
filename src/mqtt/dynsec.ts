import { randomUUID } from 'node:crypto'
import type { MqttClient } from 'mqtt'
import { commandsTopic, errorsTopic, readingsTopic } from '../../broker/topics.js'

// Mosquitto 2's dynamic-security plugin: commands go to this topic, answers come back on …/response
// (https://mosquitto.org/documentation/dynamic-security/).
const CONTROL_TOPIC = '$CONTROL/dynamic-security/v1'
const RESPONSE_TOPIC = `${CONTROL_TOPIC}/response`

type Command = { command: string; [field: string]: unknown }
type Answer = { command: string; error?: string; data?: unknown; correlationData?: string }

/** A command the plugin answered with an error (`Client already exists`, `Role not found`, …). */
class DynsecError extends Error {
  constructor(
    readonly command: string,
    readonly reason: string,
  ) {
    super(`dynamic-security ${command}: ${reason}`)
  }
}

/** The broker never answered: no dynamic-security plugin, or this user may not use it. */
class DynsecUnavailable extends Error {}

/** The role of one tote: the embedded broker's ACL (broker/README.md, Access control), spelled out for this tote. */
const toteRole = (toteId: string) => `rxtrace_tote_${toteId}`

function toteAcls(toteId: string) {
  return [
    // Publish: only its own readings topic.
    { acltype: 'publishClientSend', topic: readingsTopic(toteId), allow: true },
    // Subscribe: only its own errors and commands, exactly (a literal match: no wildcards).
    { acltype: 'subscribeLiteral', topic: errorsTopic(toteId), allow: true },
    { acltype: 'subscribeLiteral', topic: commandsTopic(toteId), allow: true },
  ]
}

/**
 * Talks to the plugin over an open MQTT connection: each command carries a `correlationData`
 * that its answer echoes. Answers that do not come within `timeoutMs` fail the call with
 * `DynsecUnavailable`.
 */
export class DynamicSecurity {
  private readonly waiting = new Map<string, { resolve: (answer: Answer) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>()

  private constructor(
    private readonly client: MqttClient,
    private readonly timeoutMs: number,
  ) {
    // The control connection starts clean each time; after a reconnect it listens for answers again.
    client.on('connect', () => {
      client.subscribe(RESPONSE_TOPIC, { qos: 1 }, (err) => {
        if (err) client.emit('error', new DynsecUnavailable(`could not subscribe to ${RESPONSE_TOPIC} again: ${err.message}`))
      })
    })
    client.on('message', (topic, payload) => {
      if (topic !== RESPONSE_TOPIC) return
      let responses: Answer[] = []
      try {
        responses = (JSON.parse(payload.toString('utf8')) as { responses?: Answer[] }).responses ?? []
      } catch {
        return // not ours to judge
      }
      for (const answer of responses) {
        const waiter = answer.correlationData === undefined ? undefined : this.waiting.get(answer.correlationData)
        if (!waiter) continue
        this.waiting.delete(answer.correlationData!)
        clearTimeout(waiter.timer)
        waiter.resolve(answer)
      }
    })
  }

  /** Subscribes to the answers; rejects with DynsecUnavailable when the broker refuses that subscription. */
  static async over(client: MqttClient, timeoutMs = 5_000): Promise<DynamicSecurity> {
    try {
      await client.subscribeAsync(RESPONSE_TOPIC, { qos: 1 }) // mqtt.js rejects when the SUBACK refuses it
    } catch (error) {
      throw new DynsecUnavailable(`the broker refused the subscription to ${RESPONSE_TOPIC}: ${(error as Error).message}`)
    }
    return new DynamicSecurity(client, timeoutMs)
  }

  /** Sends commands in one message; resolves with their answers in order, or rejects with the first error. */
  async run(commands: readonly Command[], tolerate: (answer: Answer) => boolean = () => false): Promise<Answer[]> {
    // mqtt.js would queue the command until it reconnects; the caller's retry is the better queue.
    if (!this.client.connected) throw new DynsecUnavailable('not connected to the broker')
    const tagged = commands.map((c) => ({ ...c, correlationData: randomUUID() }))
    const answers = tagged.map(
      (c) =>
        new Promise<Answer>((resolve, reject) => {
          const timer = setTimeout(() => {
            this.waiting.delete(c.correlationData)
            reject(new DynsecUnavailable(`no answer to ${c.command} on ${RESPONSE_TOPIC} within ${this.timeoutMs} ms`))
          }, this.timeoutMs)
          timer.unref()
          this.waiting.set(c.correlationData, { resolve, reject, timer })
        }),
    )
    try {
      // QoS 1: with MQTT 5 a publish this user may not make comes back as PUBACK 0x87 (not authorized).
      await this.client.publishAsync(CONTROL_TOPIC, JSON.stringify({ commands: tagged }), { qos: 1 })
    } catch (error) {
      for (const c of tagged) {
        const waiter = this.waiting.get(c.correlationData)
        this.waiting.delete(c.correlationData)
        if (waiter) clearTimeout(waiter.timer)
      }
      throw new DynsecUnavailable(`publishing to ${CONTROL_TOPIC} failed: ${(error as Error).message}`)
    }
    const settled = await Promise.all(answers)
    const failed = settled.find((a) => a.error !== undefined && !tolerate(a))
    if (failed) throw new DynsecError(failed.command, failed.error!)
    return settled
  }

  /** Start-up check: the plugin answers, and this user may administer it. */
  async check(username: string): Promise<void> {
    await this.run([{ command: 'getClient', username }])
  }

  /**
   * Gives the broker a tote's account: its own role with the tote ACL, and a client with that
   * role and this password. Idempotent: run again (a retry, another copy) it converges on the
   * same role, the same client and this password.
   */
  async provisionTote(toteId: string, password: string): Promise<void> {
    const rolename = toteRole(toteId)
    const answers = await this.run(
      [
        { command: 'createRole', rolename, acls: toteAcls(toteId) },
        { command: 'createClient', username: toteId, password, roles: [{ rolename }] },
      ],
      (a) => /already exists/i.test(a.error ?? ''),
    )
    if (answers[1]!.error !== undefined) {
      // Created before (a retry whose answer was lost): give it this password and exactly this
      // role in one command. addClientRole would fail on a client that already has the role,
      // and Mosquitto 2 answers that with a bare "Internal error".
      await this.run([{ command: 'modifyClient', username: toteId, password, roles: [{ rolename }] }])
    }
  }

  /** Fails every call still waiting (the connection is closing). */
  close(): void {
    for (const [id, waiter] of this.waiting) {
      clearTimeout(waiter.timer)
      waiter.reject(new DynsecUnavailable('closed'))
      this.waiting.delete(id)
    }
  }
}
