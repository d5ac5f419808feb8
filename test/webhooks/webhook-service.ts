import { afterAll, afterEach, beforeAll } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { startReceiver, type Receiver, type Reply } from './receiver.js'

/**
 * For a describe block: a started service whose failed webhook deliveries are retried on
 * `schedule` (WEBHOOK_RETRY_SCHEDULE), its admin token once it runs, and receivers that are
 * closed after each test.
 */
export function useWebhookService(schedule: string) {
  const receivers: Receiver[] = []
  const fixture = {
    api: undefined as unknown as TestApi,
    admin: '',
    /** Closes `receiver` after the test. */
    track<T extends Receiver>(receiver: T): T {
      receivers.push(receiver)
      return receiver
    },
    /** A receiver answering with `reply` (204 by default), closed after the test. */
    receiver: async (reply?: Reply): Promise<Receiver> => fixture.track(await startReceiver(reply)),
  }
  beforeAll(async () => {
    fixture.api = await startTestService({ WEBHOOK_RETRY_SCHEDULE: schedule })
    await fixture.api.service.start()
    fixture.admin = await fixture.api.adminToken()
  })
  afterEach(async () => {
    await Promise.all(receivers.splice(0).map((r) => r.close()))
  })
  afterAll(() => fixture.api.stop())
  return fixture
}
