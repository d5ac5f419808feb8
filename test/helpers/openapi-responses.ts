import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const

type MediaType = { schema?: unknown; example?: unknown }
export type Operation = {
  operationId: string
  summary?: string
  security?: unknown[]
  parameters?: { name: string; in: string; example?: unknown; schema?: unknown }[]
  requestBody?: { content: Record<string, MediaType> }
  responses: Record<string, { content?: Record<string, MediaType> }>
}
export type OpenApiDocument = {
  info: { version: string }
  paths: Record<string, Record<string, Operation>>
  webhooks?: Record<string, Record<string, Operation>>
  components?: { schemas: Record<string, unknown> }
}

/** RFC 6901 escaping of one reference token. */
const token = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1')

/**
 * Checks real answers against the OpenAPI 3.1 document: the operation is found by method and path
 * template, the status and media type are documented, and the body validates (JSON Schema 2020-12,
 * which OpenAPI 3.1 schemas are) against the schema given for them.
 */
export function responseValidator(doc: OpenApiDocument) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false })
  addFormats.default(ajv)
  ajv.addSchema({ ...doc, $id: 'rxtrace-openapi' })
  const templates = Object.keys(doc.paths)
    .map((path) => ({
      path,
      pattern: new RegExp(`^${path.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`),
      literal: path.replace(/\{[^}]+\}/g, '').length,
    }))
    .sort((a, b) => b.literal - a.literal) // /v1/deliveries/{id}/temperature.svg before …/{id}

  function find(method: string, path: string) {
    const template = templates.find((t) => t.pattern.test(path) && doc.paths[t.path]![method])
    return template ? { template: template.path, method, op: doc.paths[template.path]![method]! } : undefined
  }

  function anyOperationOf(path: string) {
    const template = templates.find((t) => t.pattern.test(path))
    const method = template && METHODS.find((m) => doc.paths[template.path]![m])
    return method ? { template: template.path, method, op: doc.paths[template.path]![method]! } : undefined
  }

  /** Problems with this answer; empty when it is what the document says. */
  function check(
    method: string,
    path: string,
    status: number,
    contentType: string | null,
    text: string,
  ): { operationId?: string; problems: string[] } {
    // A 405 answers a method the path does not have: the path's operations document it.
    const found = find(method.toLowerCase(), path.split('?')[0]!) ?? (status === 405 ? anyOperationOf(path.split('?')[0]!) : undefined)
    if (!found) return { problems: [`${method} ${path}: no operation in the document`] }
    const { op, template } = found
    const where = `${method} ${template} → ${status}`
    const response = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default
    if (!response) return { operationId: op.operationId, problems: [`${where}: status not documented`] }
    if (text === '') return { operationId: op.operationId, problems: [] }
    const media = (contentType ?? '').split(';')[0]!.trim()
    if (!response.content?.[media])
      return {
        operationId: op.operationId,
        problems: [
          `${where}: body of type ${media || '(none)'} not documented (documented: ${Object.keys(response.content ?? {}).join(', ') || 'no body'})`,
        ],
      }
    if (!response.content[media]!.schema) return { operationId: op.operationId, problems: [] }
    const body = /json/.test(media) ? JSON.parse(text) : text
    const ref = `rxtrace-openapi#/paths/${token(template)}/${found.method}/responses/${String(status)}/content/${token(media)}/schema`
    const validate = ajv.getSchema(ref) ?? ajv.compile({ $ref: ref })
    return validate(body)
      ? { operationId: op.operationId, problems: [] }
      : {
          operationId: op.operationId,
          problems: (validate.errors ?? []).map((e) => `${where}: ${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`),
        }
  }

  /** Whether `value` validates against the schema at `pointer` (a JSON pointer into the document). */
  function validates(pointer: string, value: unknown): string[] {
    const validate = ajv.compile({ $ref: `rxtrace-openapi#${pointer}` })
    return validate(value) ? [] : (validate.errors ?? []).map((e) => `${pointer}: ${e.instancePath || '/'} ${e.message}`)
  }

  const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method]! })),
  )
  return { check, validates, operations, find }
}
