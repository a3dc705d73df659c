import type { FastifyReply } from 'fastify'
import { SCIM_ERROR_SCHEMA } from '../../schemas/scim.js'
import { type DomainError, EmailTaken, InvalidInput } from '../common/errors.js'
import { answerTo, internal, type AnswerOptions } from './problems.js'
import { REQUEST_ID_HEADER } from './request-id.js'

/** SCIM's error body (RFC 7644 §3.12): the status as a string, and a `scimType` where SCIM names the kind. */
export interface ScimErrorBody {
  schemas: [typeof SCIM_ERROR_SCHEMA]
  status: string
  scimType?: string
  detail: string
}

export interface ScimAnswer {
  status: number
  headers: Record<string, string>
  body: ScimErrorBody
}

/** The scimType a domain error names: its own when it carries one, else the one its code means. */
function scimTypeOf(err: DomainError, status: number): string | undefined {
  const own = (err as { scimType?: unknown }).scimType
  if (typeof own === 'string') return own
  if (err instanceof EmailTaken || err.code === 'EXTERNAL_ID_TAKEN') return 'uniqueness'
  if (err.code === 'INVALID_FILTER') return 'invalidFilter'
  if (err instanceof InvalidInput) return 'invalidValue'
  return status === 400 ? 'invalidSyntax' : undefined
}

/**
 * A domain error as SCIM answers it on /scim/v2: the status and headers of the catalogue (problems.ts), so that a
 * rule means the same status in both dialects; the body SCIM's.
 */
export function scimAnswerTo(err: DomainError | undefined, options: AnswerOptions): ScimAnswer {
  const answer = err ? answerTo(err, options) : internal()
  const status = answer.status
  const scimType = err ? scimTypeOf(err, status) : undefined
  const detail = answer.problem.detail ?? answer.problem.title
  return { status, headers: answer.headers, body: { schemas: [SCIM_ERROR_SCHEMA], status: String(status), ...(scimType ? { scimType } : {}), detail } }
}

export function sendScimError(reply: FastifyReply, answer: ScimAnswer): FastifyReply {
  for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value)
  reply.header(REQUEST_ID_HEADER, reply.request.id)
  return reply.code(answer.status).type('application/scim+json').serializer(JSON.stringify).send(answer.body)
}
