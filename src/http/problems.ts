import { STATUS_CODES } from 'node:http'
import type { FastifyReply } from 'fastify'
import type { Problem } from '../../schemas/problem.js'
import { REQUEST_ID_HEADER } from './request-id.js'
import {
  Conflict, type DomainError, Forbidden, InvalidInput, MethodNotAllowed, NotFound, PayloadTooLarge, RateLimited, ReauthRequired, RequestTimeout,
  Banned, Unauthenticated, Unavailable,
  Unprocessable, UnsupportedMediaType, VersionConflict
} from '../common/errors.js'

const BEARER = 'Bearer realm="api"'

type Kind = abstract new (...args: never[]) => DomainError
type Headers = Record<string, string>

/**
 * The catalogue of answers. Each kind of domain error, its status and the headers its answer carries: the one place where Roster's rules
 * meet HTTP. The first kind an error is an instance of decides (subclasses before their parents).
 */
const ANSWERS: Array<[Kind, number, (err: DomainError) => Headers]> = [
  [InvalidInput, 400, () => ({})],
  // Version 1's status for every refusal is 401 (RFC 6750's header); `insufficient_scope` tells an SDK that a new
  // token would not help, so it does not refresh.
  // RFC 9470: a fresh sign-in would do; `max_age` says how fresh.
  [ReauthRequired, 401, (err) => ({ 'www-authenticate': `${BEARER}, error="insufficient_user_authentication", max_age=${(err as ReauthRequired).maxAgeSeconds}` })],
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
  /** The body, but for the request's id, which sendProblem adds. */
  problem: Omit<Problem, 'request_id'>
}

export const internal = (): Answer => ({
  status: 500,
  headers: {},
  problem: { type: 'about:blank', title: STATUS_CODES[500]!, status: 500, code: 'INTERNAL', detail: 'An unexpected error occurred' }
})

/** How answers are shaped where the contract lets the operator choose. */
export interface AnswerOptions {
  /** The status of an authenticated caller's refusal (FORBIDDEN_STATUS): version 1's 401, or 403. */
  forbiddenStatus: 401 | 403
}

const VERSION_1_ANSWERS: AnswerOptions = { forbiddenStatus: 401 }

/** A domain error's answer. */
export function answerTo(err: DomainError, options: AnswerOptions = VERSION_1_ANSWERS): Answer {
  const entry = ANSWERS.find(([kind]) => err instanceof kind)
  if (!entry) return internal()
  const [kind, ownStatus, headers] = entry
  // The body's code stays FORBIDDEN (or the route's own code) either way; only the status moves.
  const status = kind === Forbidden ? options.forbiddenStatus : ownStatus
  const problem: Answer['problem'] = { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, code: err.code, detail: err.message }
  if (err instanceof InvalidInput && err.errors.length) problem.errors = err.errors
  if (err instanceof Banned && err.until !== null) problem.banned_until = new Date(err.until).toISOString()
  return { status, headers: headers(err), problem }
}

/** Sends a problem answer, with the request's id in its body and (for an answer no hook saw) in its header. */
export function sendProblem(reply: FastifyReply, answer: Answer): FastifyReply {
  for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value)
  const id = reply.request.id
  reply.header(REQUEST_ID_HEADER, id)
  const problem: Problem = { ...answer.problem, request_id: id }
  return reply.code(answer.status).type('application/problem+json').serializer(JSON.stringify).send(problem)
}
