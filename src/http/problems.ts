import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Problem } from '../../schemas/problem.js'
import {
  Conflict, DomainError, Forbidden, InvalidInput, MethodNotAllowed, NotFound, PayloadTooLarge, RateLimited, RequestTimeout, Unauthenticated, Unavailable,
  Unprocessable, UnsupportedMediaType, VersionConflict
} from '../common/errors.js'
import { isRetryable, isUnavailable } from '../database/errors.js'
import type { OutageLog } from './outage.js'

const BEARER = 'Bearer realm="api"'

type Kind = abstract new (...args: never[]) => DomainError
type Headers = Record<string, string>

/**
 * Each kind of domain error, its status and the headers its answer carries: the one place where Roster's rules
 * meet HTTP. The first kind an error is an instance of decides (subclasses before their parents).
 */
const ANSWERS: Array<[Kind, number, (err: DomainError) => Headers]> = [
  [InvalidInput, 400, () => ({})],
  // The seed's status for every refusal is 401 (RFC 6750's header); `insufficient_scope` tells an SDK that a new
  // token would not help, so it does not refresh.
  [Unauthenticated, 401, () => ({ 'www-authenticate': BEARER })],
  [Forbidden, 401, () => ({ 'www-authenticate': `${BEARER}, error="insufficient_scope"` })],
  [NotFound, 404, () => ({})],
  [MethodNotAllowed, 405, (err) => ({ allow: (err as MethodNotAllowed).allowed.join(', ') })],
  [Conflict, 409, () => ({})],
  [RequestTimeout, 408, () => ({ connection: 'close' })],
  [VersionConflict, 412, () => ({})],
  [PayloadTooLarge, 413, () => ({})],
  [UnsupportedMediaType, 415, () => ({})],
  [Unprocessable, 422, () => ({})],
  [RateLimited, 429, (err) => ({ 'retry-after': String((err as RateLimited).retryAfterSeconds) })],
  [Unavailable, 503, (err) => ({ 'retry-after': String((err as Unavailable).retryAfterSeconds) })]
]

export interface Answer {
  status: number
  headers: Headers
  problem: Problem
}

const internal = (): Answer => ({
  status: 500,
  headers: {},
  problem: { type: 'about:blank', title: STATUS_CODES[500]!, status: 500, code: 'INTERNAL', detail: 'An unexpected error occurred' }
})

/** How answers are shaped where the contract lets the operator choose. */
export interface AnswerOptions {
  /** The status of an authenticated caller's refusal (FORBIDDEN_STATUS): the seed's 401, or 403. */
  forbiddenStatus: 401 | 403
}

const SEED_ANSWERS: AnswerOptions = { forbiddenStatus: 401 }

/** A domain error's answer. */
export function answerTo(err: DomainError, options: AnswerOptions = SEED_ANSWERS): Answer {
  const entry = ANSWERS.find(([kind]) => err instanceof kind)
  if (!entry) return internal()
  const [kind, seedStatus, headers] = entry
  // The body's code stays FORBIDDEN (or the route's own code) either way; only the status moves.
  const status = kind === Forbidden ? options.forbiddenStatus : seedStatus
  const problem: Problem = { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, code: err.code, detail: err.message }
  if (err instanceof InvalidInput && err.errors.length) problem.errors = err.errors
  return { status, headers: headers(err), problem }
}

const PART: Record<string, 'body' | 'query' | 'path' | 'header'> = {
  body: 'body', querystring: 'query', params: 'path', headers: 'header'
}

/** A schema validation failure, as the contract words it: each failing field with its JSON pointer. */
function fromValidation(err: FastifyError): InvalidInput {
  const where = PART[err.validationContext ?? 'body'] ?? 'body'
  const errors = (err.validation ?? []).map((v) => {
    const params = v.params as Record<string, unknown>
    const leaf = v.keyword === 'required' ? params.missingProperty
      : v.keyword === 'additionalProperties' ? params.additionalProperty : undefined
    const path = leaf === undefined ? v.instancePath : `${v.instancePath}/${String(leaf)}`
    const message = v.keyword === 'additionalProperties'
      ? (where === 'query' ? 'is not a known parameter' : 'is not a known field')
      : (v.message ?? 'is invalid')
    return { path, in: where, message }
  })
  const first = errors[0]
  const detail = first ? `${where} ${first.path || '(whole)'} ${first.message}` : `Invalid ${where}`
  return new InvalidInput(detail, errors)
}

/** Anything thrown while serving a request, as a domain error: Fastify's own errors and drivers' included. */
export function toDomainError(err: FastifyError | Error): DomainError | undefined {
  if (err instanceof DomainError) return err
  const e = err as FastifyError
  if (e.validation) return fromValidation(e)
  if (isUnavailable(err)) return new Unavailable()
  // A transaction that lost every retry to deadlocks or, on a cluster, certification conflicts: the data was
  // contended, not broken, and a retry a moment later passes.
  if (isRetryable(err)) return new Unavailable('The data was changed concurrently too often; try again', 1)
  const status = e.statusCode ?? 500
  if (status === 408) return new RequestTimeout()
  if (status === 413) return new PayloadTooLarge()
  if (status === 415) return new UnsupportedMediaType()
  if (status === 404) return new NotFound('NOT_FOUND', 'No such route')
  if (status >= 400 && status < 500) return new InvalidInput(err.message, [{ path: '', in: 'body', message: err.message }])
  return undefined
}

export function sendProblem(reply: FastifyReply, answer: Answer): FastifyReply {
  for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value)
  return reply.code(answer.status).type('application/problem+json').serializer(JSON.stringify).send(answer.problem)
}

/**
 * One error handler for the whole app: RFC 9457 problem+json with the contract's codes, never internals. A request
 * refused because the database is unreachable is told to `outage`, which logs the outage once, not each request.
 */
export function installProblems(
  app: FastifyInstance, outage: OutageLog, options: AnswerOptions & {
    /** The methods served at a path (none for an unknown path): a known path answers 405 and OPTIONS, not 404. */
    allowedMethods: (path: string) => string[]
  }
): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const domain = toDomainError(err)
    const answer = domain ? answerTo(domain, options) : internal()
    if (!(err instanceof DomainError) && isUnavailable(err)) outage.refused(err)
    else if (isRetryable(err)) request.log.warn({ err }, 'request refused: the data was contended past every retry')
    // A domain error's 503 (load shed, say) is an answer foreseen, logged as a rate where it is raised.
    else if (answer.status >= 500 && !(err instanceof DomainError)) request.log.error({ err }, 'request failed')
    else if (!(err instanceof DomainError)) request.log.info({ code: err.code, msg: err.message }, 'request refused')
    return sendProblem(reply, answer)
  })
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!
    const served = options.allowedMethods(path)
    if (served.length > 0) {
      const allowed = [...served, 'OPTIONS']
      if (request.method === 'OPTIONS') return reply.code(204).header('allow', allowed.join(', ')).send()
      return sendProblem(reply, answerTo(new MethodNotAllowed(request.method, allowed), options))
    }
    return sendProblem(reply, answerTo(new NotFound('NOT_FOUND', `No route for ${request.method} ${path}`), options))
  })
}

/**
 * Errors Node's HTTP parser meets before Fastify sees a request (both Content-Length and Transfer-Encoding, a NUL or a
 * folded header, a request line or headers over 16 KiB, a request too slow to arrive): answered as problem+json too,
 * on a connection then closed.
 */
export function clientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  const [status, code, detail]: [number, Problem['code'], string] =
    err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'HEADERS_TOO_LARGE', 'The request line or headers are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'REQUEST_TIMEOUT', 'The request took too long to arrive']
        : [400, 'BAD_REQUEST', 'The request is not well-formed HTTP']
  const title = STATUS_CODES[status] ?? 'Error'
  const body = JSON.stringify({ type: 'about:blank', title, status, code, detail } satisfies Problem)
  socket.end(`HTTP/1.1 ${status} ${title}\r\nConnection: close\r\nContent-Type: application/problem+json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nX-Content-Type-Options: nosniff\r\n\r\n${body}`)
}
