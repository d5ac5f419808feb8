// Loaded first on purpose: these domain schemas are built with plain zod before anything loads
// @hono/zod-openapi, as happens when a program imports the domain before the service.
import { coldChainSchema } from '../../src/domain/cold-chain.js'
import { tracePointSchema } from '../../src/domain/temperature-trace.js'
import { afterAll, expect, it } from 'vitest'

let stop: (() => Promise<void>) | undefined
afterAll(() => stop?.())

it('documents the cold_chain block and the trace whichever module is loaded first', async () => {
  expect(coldChainSchema.shape.state).toBeDefined()
  expect(tracePointSchema.shape).toBeDefined()
  const { startTestService } = await import('../helpers/service.js')
  const api = await startTestService()
  stop = () => api.stop()
  const res = await api.request('GET', '/v1/openapi.json')
  expect(res.status).toBe(200)
  expect(Object.keys(res.body.components.schemas)).toEqual(expect.arrayContaining(['ColdChain', 'TracePoint', 'TraceExcursion']))
})
