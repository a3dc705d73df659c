import { createHash } from 'node:crypto'
import { AjvCompiler, type BuildCompilerFromPool } from '@fastify/ajv-compiler'
import { SerializerSelector, type SerializerFactory } from '@fastify/fast-json-stringify-compiler'
import type { AnySchema, Options as AjvOptions } from 'ajv'
import type { FastifySchemaCompiler, FastifyServerOptions } from 'fastify'

/** A compiler factory as Fastify calls it: options for Ajv in, a compiler of each route's schema out. */
type RouteCompilerFactory = (externalSchemas: Record<string, AnySchema>, options?: { customOptions?: AjvOptions }) => FastifySchemaCompiler<AnySchema>
type Validator = ReturnType<FastifySchemaCompiler<AnySchema>>
type Serializer = ReturnType<ReturnType<SerializerFactory>>

/** What every schema of one app is compiled against: its shared schemas and the compiler's options. */
const scopeOf = (externalSchemas: unknown, options: unknown) => createHash('sha256').update(JSON.stringify([externalSchemas, options])).digest('base64url')

/**
 * Compiled validators and serializers, kept for the life of the process under the text of the schema they were
 * compiled from: route schemas are built anew with each app, so the compilers' own caches never hit, and a test
 * suite builds hundreds of apps.
 */
const validators = new Map<string, Validator>()
const serializers = new Map<string, Serializer>()

/**
 * @fastify/ajv-compiler declares its compilers as taking a bare schema, while Fastify calls them with the route's
 * definition (`FastifyRouteSchemaDef`, with `httpPart`): the two casts below only convert between these two
 * declarations of the same functions.
 */
const ajvPool = AjvCompiler() as unknown as RouteCompilerFactory

/**
 * Query strings and paths are text, so their schemas coerce (`limit=5` is the integer 5); bodies are not coerced,
 * so a JSON number where a string is due is a 400, as it is in any other encoding's schema check.
 */
const buildValidator: RouteCompilerFactory = (externalSchemas, ajvOptions) => {
  const coercing = ajvPool(externalSchemas, ajvOptions)
  const strict = ajvPool(externalSchemas, { ...ajvOptions, customOptions: { ...ajvOptions?.customOptions, coerceTypes: false } })
  const scope = scopeOf(externalSchemas, ajvOptions)
  return (route) => {
    const body = route.httpPart === 'body'
    const key = `${scope} ${body ? 'strict' : 'coercing'} ${JSON.stringify(route.schema)}`
    let validate = validators.get(key)
    if (!validate) validators.set(key, validate = (body ? strict : coercing)(route))
    return validate
  }
}

const serializerPool = SerializerSelector()

const buildSerializer: SerializerFactory = (externalSchemas, options) => {
  const compile = serializerPool(externalSchemas, options)
  const scope = scopeOf(externalSchemas, options)
  return (route) => {
    const key = `${scope} ${JSON.stringify(route.schema)}`
    let serialize = serializers.get(key)
    if (!serialize) serializers.set(key, serialize = compile(route))
    return serialize
  }
}

/** The schema compilers of every app: Fastify's own, with the caches above. */
export const compilersFactory: NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']> = {
  buildValidator: buildValidator as unknown as BuildCompilerFromPool,
  buildSerializer
}
