import formbody from '@fastify/formbody'
import multipart from '@fastify/multipart'
import { PassThrough } from 'node:stream'
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest, preParsingAsyncHookHandler, preValidationAsyncHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { DomainError, InvalidInput, invalidField, PayloadTooLarge, RequestTimeout } from '../common/errors.js'
import { holdsLoneSurrogate } from '../common/text.js'

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

/** A body's fields, a name given more than once an array of its values. */
type Fields = Record<string, string | string[]>

/** Fields without a prototype: a field named `__proto__` is a field like any other. */
const fields = () => Object.create(null) as Fields

/**
 * An urlencoded form: each name and value percent-decoded as UTF-8 (`+` a space), a name given more than once an
 * array of its values. A `%` not followed by two hex digits is itself (`50%off`), as most form parsers take it; escapes
 * that decode to bytes that are not UTF-8 (`%FF`) are a 400 rather than text the client never sent. (Raw bytes that
 * are not UTF-8, which a form should not hold unescaped, reach here already replaced by U+FFFD.)
 */
export function parseForm(text: string): Fields {
  const body = fields()
  for (const pair of text.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const name = formDecode(eq < 0 ? pair : pair.slice(0, eq))
    const value = eq < 0 ? '' : formDecode(pair.slice(eq + 1))
    addField(body, name, value)
  }
  return body
}

/** A `%` that does not start an escape: it stands for itself. */
const BARE_PERCENT = /%(?![0-9A-Fa-f]{2})/g

function formDecode(raw: string): string {
  const text = raw.replaceAll('+', ' ')
  if (!text.includes('%')) return text
  try {
    return decodeURIComponent(text.replace(BARE_PERCENT, '%25'))
  } catch {
    throw invalidField('', 'body', 'is not valid UTF-8', 'A field of the form is percent-encoded bytes that are not UTF-8')
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

function addField(body: Fields, name: string, value: string) {
  const existing = body[name]
  body[name] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [existing, value]
}

/** Reads a multipart body's parts into one plain object, the request's body. */
async function collectParts(request: FastifyRequest): Promise<void> {
  const body = fields()
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
async function bodies(app: FastifyInstance): Promise<void> {
  app.removeContentTypeParser('text/plain')
  app.removeContentTypeParser('application/json')
  acceptJson(app, 'application/json')
  await app.register(formbody, { bodyLimit: app.config.BODY_LIMIT, parser: parseForm })
  app.addHook('preParsing', bodyDeadline)
}

/**
 * Why a JSON body was refused, told apart (Fastify's parser says the same of both, naming application/json): text
 * that is not JSON, or JSON holding a key refused as prototype poisoning.
 */
function unreadable(text: string): Error {
  try {
    JSON.parse(text)
  } catch (err) {
    return Object.assign(new Error(`The body is not valid JSON: ${(err as Error).message}`), { code: 'FST_ERR_CTP_INVALID_JSON_BODY', statusCode: 400 })
  }
  return invalidField('', 'body', 'holds a key __proto__, or constructor with prototype', 'The body holds a key __proto__, or constructor with prototype, which is refused')
}

/**
 * Reads bodies of a JSON media type (`application/json`, and in their own scopes `application/merge-patch+json` and
 * `application/scim+json`) as Fastify parses JSON, prototype poisoning refused, from bytes that must be UTF-8: a
 * lossy decoding would store replacement characters in place of what the client sent.
 */
export function acceptJson(scope: FastifyInstance, type: string): void {
  const parseJson = scope.getDefaultJsonParser('error', 'error')
  scope.addContentTypeParser(type, { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    let text: string
    try {
      text = utf8.decode(body)
    } catch {
      return done(invalidField('', 'body', 'is not valid UTF-8', 'The body is not valid UTF-8'), undefined)
    }
    void parseJson(request, text, (err, value) => {
      if ((err as { code?: string } | null)?.code === 'FST_ERR_CTP_INVALID_JSON_BODY') return done(unreadable(text), undefined)
      if (!err && holdsLoneSurrogate(text, value)) return done(invalidField('', 'body', 'holds a lone UTF-16 surrogate', 'A string of the body holds a lone UTF-16 surrogate (an unpaired \\ud800 to \\udfff)'), undefined)
      done(err, value)
    })
  })
}

/** How long a request body may take to arrive, once its headers have: a body dripped slower is answered 408. */
export const BODY_TIMEOUT_MS = 10_000

const bodyTooSlow = () => Object.assign(new Error('The request body took too long to arrive'), { statusCode: 408 })

/**
 * A deadline on reading the body: the connection timeout restarts with every byte, and Node's request timeout is
 * checked too rarely, so a body dripped a byte at a time could hold a connection for well over a minute. The body
 * is read through a stream of its own, failed at the deadline, so the parser reading it answers 408 (and the
 * connection closes) instead of cutting it unanswered. Requests without a body pass untouched.
 *
 * Everything made here belongs to the request and ends with it: the timer is cleared when the body has been read,
 * when the answer has gone out and when the request closes, whichever comes first; the stream keeps an error
 * listener of its own for its whole life, so a deadline met while nothing reads it (a route that takes no body, an
 * answer already sent) can never become an uncaught error. What happens to a body still unread when the answer
 * goes out is unread-body.ts's business.
 */
const bodyDeadline: preParsingAsyncHookHandler = async (request, reply, payload) => {
  const headers = request.headers
  if (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) return payload
  // GET, HEAD and TRACE bodies are never parsed: Node discards them, and unread-body.ts bounds how long that takes.
  if (BODYLESS.has(request.method)) return payload
  // A file streamed to its handler may take as long as its size needs; the connection's idle timeout still holds.
  if (request.routeOptions.config.streamedBody) return payload
  // Multipart bodies are read from the raw request by @fastify/multipart: the multipart step keeps their deadline.
  if (headers['content-type']?.toLowerCase().startsWith('multipart/')) return payload
  const body = new PassThrough()
  body.on('error', ignore)
  const timer = setTimeout(() => {
    payload.unpipe(body)
    body.destroy(bodyTooSlow())
  }, BODY_TIMEOUT_MS)
  const release = () => clearTimeout(timer)
  body.once('end', release)
  body.once('close', release)
  reply.raw.once('close', release)
  // A client that goes away mid-body: the reader is told, rather than left waiting for an end that never comes.
  request.raw.once('close', () => {
    release()
    if (!request.raw.complete && !body.destroyed) body.destroy(Object.assign(new Error('The client closed the request mid-body'), { statusCode: 400 }))
  })
  payload.pipe(body)
  return body
}

const ignore = () => {}
const BODYLESS = new Set(['GET', 'HEAD', 'TRACE'])

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

/** Writes whose body has a meaning: a DELETE's has none in HTTP, and one sent anyway (a form library's) is ignored. */
const WRITES = new Set(['POST', 'PUT', 'PATCH'])

/**
 * The no-body step, for writes that declare no body: fields sent anyway are each unknown to the operation (400, as
 * any unknown field is), and a bare value or a list is no body it takes. None, an empty one or `{}` passes, as does
 * a body the route reads itself (an import's stream).
 */
export function noBodyStep(route: RouteOptions): preValidationAsyncHookHandler | undefined {
  if (route.schema?.body !== undefined || ![route.method].flat().some((m) => WRITES.has(m))) return undefined
  return async (request) => {
    const body: unknown = request.body
    if (body === undefined || body === null || ((typeof body === 'string' || Buffer.isBuffer(body)) && body.length === 0)) return
    if (typeof body !== 'object' || Buffer.isBuffer(body) || Array.isArray(body)) {
      throw invalidField('', 'body', 'is not taken by this operation', 'This operation takes no body')
    }
    const prototype: unknown = Object.getPrototypeOf(body)
    if (prototype !== Object.prototype && prototype !== null) return
    const [field] = Object.keys(body)
    if (field !== undefined) throw invalidField(`/${field}`, 'body', 'is not a known field', `body /${field} is not a known field: this operation takes no body`)
  }
}

/** The multipart step: for routes in a `withMultipart` scope; a request that is not multipart passes. */
export function multipartStep(_route: RouteOptions, scope: FastifyInstance): preValidationAsyncHookHandler | undefined {
  if (!scope.hasRequestDecorator('isMultipart')) return undefined
  return async (request) => {
    if (request.isMultipart()) await withinDeadline(request, collectParts(request))
  }
}

/**
 * The body deadline for a multipart body, read from the raw request: past it the parts stop being read and the
 * request is answered 408, like any other body. The timer ends with the reading, whichever way it ends.
 */
function withinDeadline(request: FastifyRequest, reading: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      request.raw.unpipe()
      reject(new RequestTimeout())
    }, BODY_TIMEOUT_MS)
  })
  // The losing side of the race must not become an unhandled rejection: the reading fails once the request closes.
  reading.catch(ignore)
  return Promise.race([reading, deadline]).finally(() => clearTimeout(timer))
}

export default fp(bodies, { name: 'bodies' })
