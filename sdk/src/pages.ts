import type { Client } from 'openapi-fetch'
import type { paths } from './schema.js'

type Get<P extends keyof paths> = paths[P] extends { get: infer O } ? O : never
type Json200<P extends keyof paths> = Get<P> extends { responses: { 200: { content: { 'application/json': infer R } } } } ? R : never

/** The list operations of the API: `GET` paths answering `{ data: [...], next_cursor }`. */
export type PagedPath = { [P in keyof paths]: Json200<P> extends { data: unknown[]; next_cursor: string | null } ? P : never }[keyof paths]
export type PageItem<P extends PagedPath> = Json200<P> extends { data: (infer T)[] } ? T : never
/** The operation's parameters (`path` for `{id}`, `query` filters and `limit`); the cursor is the iterator's business. */
export type PageQuery<P extends PagedPath> =
  Get<P> extends { parameters: infer Params }
    ? {
        [K in keyof Params as K extends 'path' | 'query' ? K : never]?: K extends 'query'
          ? Omit<NonNullable<Params[K]>, 'cursor'>
          : Params[K]
      }
    : never

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: unknown,
  ) {
    const p = problem as { code?: string; detail?: string } | undefined
    super(`${status} ${p?.code ?? 'error'}${p?.detail ? `: ${p.detail}` : ''}`)
    this.name = 'ApiError'
  }
}

/**
 * Every item of a list, fetching the next page (its `next_cursor`) only when the caller has
 * consumed this one; stop early with `break`. A failed page throws `ApiError` with the problem.
 */
export async function* paginate<P extends PagedPath>(
  api: Client<paths>,
  path: P,
  params: PageQuery<P> = {} as PageQuery<P>,
): AsyncGenerator<PageItem<P>> {
  const { path: pathParams, query } = params as { path?: Record<string, string>; query?: Record<string, unknown> }
  let cursor: string | undefined
  do {
    // One call shape for every list path: the typed surface is PageQuery above.
    const get = api.GET as (
      path: string,
      init: unknown,
    ) => Promise<{ data?: { data: PageItem<P>[]; next_cursor: string | null }; error?: unknown; response: Response }>
    const { data, error, response } = await get(path, { params: { path: pathParams, query: { ...query, ...(cursor ? { cursor } : {}) } } })
    if (!data) throw new ApiError(response.status, error)
    yield* data.data
    cursor = data.next_cursor ?? undefined
  } while (cursor)
}
