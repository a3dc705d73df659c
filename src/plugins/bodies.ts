import formbody from '@fastify/formbody'
import multipart from '@fastify/multipart'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError, validationFailed } from '../lib/errors.js'
import { addRouteHook } from '../lib/route-hooks.js'

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** A file part's content as the field's value: UTF-8, surrounding white space trimmed. */
export function fileText(buffer: Buffer, field: string): string {
  try {
    return utf8.decode(buffer).trim()
  } catch {
    throw validationFailed(`${field} is not valid UTF-8`, [{ path: `/${field}`, in: 'body', message: 'is not valid UTF-8' }])
  }
}

/** Per-request multipart limits: write bodies are a handful of short fields. */
export const MULTIPART_LIMITS = {
  fieldNameSize: 100,
  fieldSize: 4096,
  fields: 10,
  fileSize: 4096,
  files: 10,
  parts: 12,
  headerPairs: 20
}

function addField(body: Record<string, unknown>, name: string, value: string) {
  const existing = body[name]
  body[name] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [existing, value]
}

/** Reads a multipart body's parts into one plain object, the request's body. */
async function collectParts(request: FastifyRequest): Promise<void> {
  const body: Record<string, unknown> = Object.create(null)
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        addField(body, part.fieldname, fileText(await part.toBuffer(), part.fieldname))
      } else {
        if (part.valueTruncated) throw new ApiError(413, 'PAYLOAD_TOO_LARGE', `Field ${part.fieldname} is too large`)
        addField(body, part.fieldname, String(part.value))
      }
    }
  } catch (err) {
    // Limits (413) and our own answers carry a status; anything else thrown while reading the stream is a
    // malformed body: no boundary, a truncated part, a broken header.
    if (typeof (err as { statusCode?: unknown }).statusCode === 'number') throw err
    throw validationFailed('The multipart body is malformed', [{ path: '', in: 'body', message: (err as Error).message }])
  }
  request.body = body
}

/**
 * Request body encodings of the contract, app-wide: JSON (built in) and urlencoded forms. Plain text is a body only
 * where a key path says so (its own raw parser); elsewhere it is a 415. Multipart forms are accepted by the routes
 * registered through `withMultipart` below.
 */
export default fp(async (app) => {
  app.removeContentTypeParser('text/plain')
  await app.register(formbody, { bodyLimit: app.config.BODY_LIMIT })
}, { name: 'bodies', dependencies: ['config'], fastify: '5.x' })

/**
 * A scope for the routes that take a body: they also accept multipart forms. Fields and file parts both arrive as
 * plain values (a file part's content is its value), so every write validates the same object whatever the
 * encoding. Parts are read into memory within tight limits: no temporary files exist.
 *
 * Reads live outside this scope: @fastify/multipart adds an onRequest and an onResponse hook (for cleaning up
 * temporary files we never write) to every route of the scope it is registered in, and GETs need neither.
 */
export function withMultipart(routes: FastifyPluginAsync): FastifyPluginAsync {
  return async (scope) => {
    await scope.register(multipart, { limits: MULTIPART_LIMITS })

    // A request that is not multipart passes this step synchronously.
    scope.addHook('onRoute', (route) => {
      addRouteHook(route, 'preValidation', (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void) => {
        if (!request.isMultipart()) return done()
        collectParts(request).then(() => done(), done)
      })
    })

    await scope.register(routes)
  }
}
