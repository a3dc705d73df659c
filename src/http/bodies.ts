import formbody from '@fastify/formbody'
import multipart from '@fastify/multipart'
import { PassThrough } from 'node:stream'
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest, preParsingHookHandler } from 'fastify'
import { DomainError, InvalidInput, invalidField, PayloadTooLarge } from '../common/errors.js'
import type { RouteStep } from './lifecycle.js'

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * Fields taken exactly as sent, in every encoding: a password's surrounding spaces are part of it. (Other values
 * sent as a file or a bare body are trimmed: a file usually ends with a newline that is not part of the value.)
 */
const VERBATIM = new Set(['password', 'current_password'])

/** A value sent as the content of a file part or a bare body: trimmed, unless the field is taken verbatim. */
export function bareValue(text: string, field: string): string {
  return VERBATIM.has(field) ? text : text.trim()
}

/** A file part's content as the field's value: UTF-8, surrounding white space trimmed unless verbatim. */
export function fileText(buffer: Buffer, field: string): string {
  try {
    return bareValue(utf8.decode(buffer), field)
  } catch {
    throw invalidField(`/${field}`, 'body', 'is not valid UTF-8')
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
        if (part.valueTruncated) throw new PayloadTooLarge(`Field ${part.fieldname} is too large`)
        addField(body, part.fieldname, String(part.value))
      }
    }
  } catch (err) {
    // Our own answers, and the library's limits (413, with a status), stand; anything else thrown while reading the
    // stream is a malformed body: no boundary, a truncated part, a broken header.
    if (err instanceof DomainError || typeof (err as { statusCode?: unknown }).statusCode === 'number') throw err
    throw new InvalidInput('The multipart body is malformed', [{ path: '', in: 'body', message: (err as Error).message }])
  }
  request.body = body
}

/**
 * Request body encodings of the contract, app-wide: JSON (built in) and urlencoded forms. Plain text is a body only
 * where a key path says so (its own raw parser); elsewhere it is a 415. Multipart forms are accepted by the routes
 * registered through `withMultipart` below.
 */
export async function installBodies(app: FastifyInstance): Promise<void> {
  app.removeContentTypeParser('text/plain')
  await app.register(formbody, { bodyLimit: app.config.BODY_LIMIT })
  app.addHook('preParsing', bodyDeadline)
}

/** How long a request body may take to arrive, once its headers have: a body dripped slower is answered 408. */
export const BODY_TIMEOUT_MS = 10_000

/**
 * A deadline on reading the body: the connection timeout restarts with every byte, and Node's request timeout is
 * checked too rarely, so a body dripped a byte at a time could hold a connection for well over a minute. The body
 * is read through a stream of its own, failed at the deadline: the request is answered 408 (and the connection
 * closed), not cut without an answer. Requests without a body pass untouched.
 */
const bodyDeadline: preParsingHookHandler = (request, _reply, payload, done) => {
  if (request.headers['content-length'] === undefined && request.headers['transfer-encoding'] === undefined) return done(null, payload)
  if (request.headers['content-type']?.toLowerCase().startsWith('multipart/')) {
    // @fastify/multipart reads the raw request itself: past the deadline the connection is cut, unanswered.
    const timer = setTimeout(() => request.raw.destroy(), BODY_TIMEOUT_MS)
    timer.unref()
    request.raw.once('end', () => clearTimeout(timer))
    request.raw.once('close', () => clearTimeout(timer))
    return done(null, payload)
  }
  const body = new PassThrough()
  const timer = setTimeout(() => {
    payload.unpipe(body)
    body.destroy(Object.assign(new Error('The request body took too long to arrive'), { statusCode: 408 }))
  }, BODY_TIMEOUT_MS)
  timer.unref()
  body.once('end', () => clearTimeout(timer))
  body.once('close', () => clearTimeout(timer))
  payload.pipe(body)
  done(null, body)
}

/**
 * A scope for the routes that take a body: they also accept multipart forms, read by the multipart step. Fields and
 * file parts both arrive as plain values (a file part's content is its value), so every write validates the same
 * object whatever the encoding. Parts are read into memory within tight limits: no temporary files exist.
 *
 * Reads live outside this scope: @fastify/multipart adds an onRequest and an onResponse hook (for cleaning up
 * temporary files we never write) to every route of the scope it is registered in, and GETs need neither.
 */
export function withMultipart(routes: FastifyPluginAsync): FastifyPluginAsync {
  return async (scope) => {
    await scope.register(multipart, { limits: MULTIPART_LIMITS })
    await scope.register(routes)
  }
}

/** The multipart step: for routes in a `withMultipart` scope; a request that is not multipart passes synchronously. */
export const multipartStep: RouteStep = (_route, scope) => {
  if (!scope.hasRequestDecorator('isMultipart')) return undefined
  return (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void) => {
    if (!request.isMultipart()) return done()
    collectParts(request).then(() => done(), done)
  }
}
