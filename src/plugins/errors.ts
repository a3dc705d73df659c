import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { isUnavailable } from '../database.js'
import { ApiError, validationFailed } from '../lib/errors.js'

const PART: Record<string, 'body' | 'query' | 'path' | 'header'> = {
  body: 'body', querystring: 'query', params: 'path', headers: 'header'
}

function fromValidation(err: FastifyError): ApiError {
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
  return validationFailed(detail, errors)
}

/** Turns anything thrown while serving a request into one of the contract's answers. */
export function toApiError(err: FastifyError): ApiError {
  if (err instanceof ApiError) return err
  if (err.validation) return fromValidation(err)
  if (isUnavailable(err)) {
    return new ApiError(503, 'UNAVAILABLE', 'The service is temporarily unavailable', { headers: { 'retry-after': '5' } })
  }
  const status = err.statusCode ?? 500
  if (status === 413) return new ApiError(413, 'PAYLOAD_TOO_LARGE', 'The request body is too large')
  if (status === 415) return new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send JSON, a urlencoded form or multipart/form-data')
  if (status === 429) return new ApiError(429, 'RATE_LIMITED', 'Too many requests', { headers: { 'retry-after': '60' } })
  if (status === 404) return new ApiError(404, 'NOT_FOUND', 'No such route')
  if (status >= 400 && status < 500) return validationFailed(err.message, [{ path: '', in: 'body', message: err.message }])
  return new ApiError(500, 'INTERNAL', 'An unexpected error occurred')
}

export function sendProblem(reply: FastifyReply, error: ApiError): FastifyReply {
  for (const [name, value] of Object.entries(error.headers)) reply.header(name, value)
  return reply.code(error.statusCode).type('application/problem+json').serializer(JSON.stringify).send(error.toProblem())
}

/** One error handler for the whole app: RFC 9457 problem+json with the contract's codes, never internals. */
export default fp(async (app) => {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const error = toApiError(err)
    if (error.statusCode >= 500) request.log.error({ err }, 'request failed')
    else if (!(err instanceof ApiError)) request.log.info({ code: err.code, msg: err.message }, 'request refused')
    return sendProblem(reply, error)
  })
  app.setNotFoundHandler((request, reply) => {
    return sendProblem(reply, new ApiError(404, 'NOT_FOUND', `No route for ${request.method} ${request.url.split('?')[0]}`))
  })
}, { name: 'errors', fastify: '5.x' })
