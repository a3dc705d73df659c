import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { DomainError, InvalidInput, MethodNotAllowed, NotFound, PayloadTooLarge, RequestTimeout, Unavailable, UnsupportedMediaType } from '../common/errors.js'
import { isRetryable, isUnavailable } from '../database/errors.js'
import { ping } from '../database/index.js'
import { allowedMethods } from './methods.js'
import { OutageLog } from './outage.js'
import { answerTo, internal, sendProblem, type AnswerOptions } from './problems.js'

const PART: Record<string, 'body' | 'query' | 'path' | 'header'> = {
  body: 'body', querystring: 'query', params: 'path', headers: 'header'
}

/** A schema validation failure, as the contract words it: each failing field with its JSON pointer. */
function fromValidation(err: FastifyError): InvalidInput {
  const where = PART[err.validationContext ?? 'body'] ?? 'body'
  const errors = (err.validation ?? []).map((v) => {
    const params = v.params
    const leaf = v.keyword === 'required' ? params.missingProperty
      : v.keyword === 'additionalProperties' ? params.additionalProperty : undefined
    const path = typeof leaf === 'string' ? `${v.instancePath}/${leaf}` : v.instancePath
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

/**
 * One error handler for the whole app: RFC 9457 problem+json with the contract's codes, never internals. A request
 * refused because the database is unreachable is told to `outage`, which logs the outage once, not each request.
 */
async function errorHandler(app: FastifyInstance): Promise<void> {
  const outage = new OutageLog(app.log, () => ping(app.db))
  app.addHook('onClose', async () => outage.close())
  const options: AnswerOptions = { forbiddenStatus: app.config.FORBIDDEN_STATUS }
  // The methods served at a path (none for an unknown path): a known path answers 405 and OPTIONS, not 404.
  const methodsAt = allowedMethods(() => app.routePlans)

  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const domain = toDomainError(err)
    const answer = domain ? answerTo(domain, options) : internal()
    if (!(err instanceof DomainError) && isUnavailable(err)) outage.refused(err)
    else if (isRetryable(err)) request.log.warn({ err }, 'request refused: the data was contended past every retry')
    // A domain error's 503 (load shed, say) is an answer foreseen, logged as a rate where it is raised.
    else if (answer.status >= 500 && !(err instanceof DomainError)) request.log.error({ err }, 'request failed')
    // `detail`, as in the problem body: under `msg` it would sit beside the line's own message, a key written twice.
    else if (!(err instanceof DomainError)) request.log.info({ code: err.code, detail: err.message }, 'request refused')
    return sendProblem(reply, answer)
  })
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!
    const served = methodsAt(path)
    if (served.length > 0) {
      const allowed = [...served, 'OPTIONS']
      if (request.method === 'OPTIONS') return reply.code(204).header('allow', allowed.join(', ')).send()
      return sendProblem(reply, answerTo(new MethodNotAllowed(request.method, allowed), options))
    }
    return sendProblem(reply, answerTo(new NotFound('NOT_FOUND', `No route for ${request.method} ${path}`), options))
  })
}

export default fp(errorHandler, { name: 'error-handler', dependencies: ['database'] })
