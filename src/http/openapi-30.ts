import type { OpenAPIV3_1 } from 'openapi-types'

/** A JSON value, walked without knowing its shape. */
type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** `{ type: 'null' }`, JSON Schema's null, which 3.0 writes as `nullable: true` on the other members of a union. */
function isNullType(node: Json): boolean {
  return node !== null && typeof node === 'object' && !Array.isArray(node) && node.type === 'null'
}

/**
 * A schema's OpenAPI 3.1 (JSON Schema 2020-12) keywords in 3.0's terms: `examples: [a, …]` becomes `example: a`,
 * `const: c` becomes `enum: [c]`, `type: [t, 'null']` and a union with `{ type: 'null' }` become the other type with
 * `nullable: true`.
 */
function downgrade(node: Json, inSchema: boolean): Json {
  if (Array.isArray(node)) return node.map((item) => downgrade(item, inSchema))
  if (node === null || typeof node !== 'object') return node
  const out: { [key: string]: Json } = {}
  for (const [key, value] of Object.entries(node)) {
    // `examples` of a parameter or a media type is a map of named examples in both versions: only a schema's is a list.
    if (inSchema && key === 'examples' && Array.isArray(value)) {
      if (value.length > 0) out.example = downgrade(value[0]!, false)
    } else if (inSchema && key === 'const') {
      out.enum = [downgrade(value, false)]
    } else if (inSchema && (key === 'anyOf' || key === 'oneOf') && Array.isArray(value) && value.some(isNullType)) {
      // A union with null: the other members, nullable. One member is merged in (a reference through allOf, since
      // 3.0 allows nothing beside a $ref).
      const others = value.filter((member) => !isNullType(member)).map((member) => downgrade(member, true))
      const only = others.length === 1 ? others[0] : undefined
      if (only && typeof only === 'object' && !Array.isArray(only) && only !== null && !('$ref' in only)) Object.assign(out, only)
      else if (only) out.allOf = [only]
      else out[key] = others
      out.nullable = true
    } else if (inSchema && key === 'type' && Array.isArray(value)) {
      const types = value.filter((type) => type !== 'null')
      if (types.length === 1) out.type = types[0]!
      else out.anyOf = types.map((type) => ({ type }))
      if (types.length < value.length) out.nullable = true
    } else {
      out[key] = downgrade(value, inSchema || key === 'schema' || key === 'schemas' || key === 'properties' || key === 'items' ||
        key === 'allOf' || key === 'anyOf' || key === 'oneOf' || key === 'not' || key === 'additionalProperties')
    }
  }
  return out
}

/**
 * The document as OpenAPI 3.0.3, for the generators mobile teams use that do not read 3.1 fully yet (openapi-generator's
 * Kotlin and Swift clients), from the same 3.1 document: the same paths, operations and components. A 3.1-only
 * construct that this does not convert makes the 3.0 validation of the test suite fail (test/http/openapi.test.ts).
 * `@apiture/openapi-down-convert` does the same for any document, but depends on TypeScript 4 at run time.
 */
export function asOpenApi30(document: OpenAPIV3_1.Document): { [key: string]: Json } {
  // A plain JSON copy: what is walked is the document as clients read it.
  const converted = downgrade(JSON.parse(JSON.stringify(document)) as Json, false)
  const copy: { [key: string]: Json } = converted !== null && typeof converted === 'object' && !Array.isArray(converted) ? converted : {}
  copy.openapi = '3.0.3'
  delete copy.webhooks
  delete copy.jsonSchemaDialect
  return copy
}
