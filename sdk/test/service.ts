import { ADMIN, startTestService, type TestApi } from '../../test/helpers/service.js'

export { ADMIN }

/** The real service, listening on free ports (the SDK talks to it over HTTP like any user). */
export async function listeningService(env: Record<string, string> = {}): Promise<{ api: TestApi; baseUrl: string }> {
  const api = await startTestService(env)
  const { httpPort } = await api.service.start()
  return { api, baseUrl: `http://127.0.0.1:${httpPort}` }
}

/** Whether the service's OpenAPI document has this operation (endpoints land in parallel branches). */
export async function documents(baseUrl: string, method: string, path: string): Promise<boolean> {
  const doc = (await (await fetch(`${baseUrl}/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> }
  return Boolean(doc.paths[path]?.[method])
}
