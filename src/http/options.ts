import type { IncomingMessage } from 'node:http'
import type { FastifyServerOptions } from 'fastify'
import { LogController } from 'fastify'
import type { Config } from '../../schemas/config.js'
import { SCIM_BASE } from '../../schemas/scim.js'
import { InvalidInput } from '../common/errors.js'
import { clientError } from './client-errors.js'
import { compilersFactory } from './compilers.js'
import { answerTo, sendProblem } from './problems.js'
import { requestId } from './request-id.js'
import { scimAnswerTo, sendScimError } from './scim-errors.js'

const OVERRIDABLE = new Set(['PUT', 'DELETE'])

/**
 * `POST` with `X-HTTP-Method-Override: PUT|DELETE` is routed as that method, so the override reaches the real
 * route with its own authorization and validation. Runs before routing, for real sockets and inject alike.
 */
function methodOverride(req: IncomingMessage): string {
  const override = req.headers['x-http-method-override']
  if (req.method === 'POST' && typeof override === 'string') {
    const method = override.trim().toUpperCase()
    if (OVERRIDABLE.has(method)) req.method = method
  }
  return req.url ?? '/'
}

/** The server's own options: limits, timeouts, routing and the answers to what never reaches a route. */
export function serverOptions(config: Config): FastifyServerOptions {
  return {
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: false } },
    schemaController: { compilersFactory },
    bodyLimit: config.BODY_LIMIT,
    trustProxy: config.TRUST_PROXY ?? false,
    rewriteUrl: methodOverride,
    // Every answer, log line and problem body of a request carries its id (request-id.ts, headers.ts).
    genReqId: requestId,
    requestTimeout: 15_000,
    connectionTimeout: 10_000,
    keepAliveTimeout: 10_000,
    return503OnClosing: true,
    // Fastify fails a start whose plugin takes over 10 s. The database plugin migrates at start, which takes as long
    // as the tables make it and waits for another instance's migration of the same database: a start is bounded by
    // the deadlines of what it waits on (a connection's, the migration lock's), not by a guess of Fastify's.
    pluginTimeout: 0,
    // A percent-encoded address of 254 characters fits; longer path parameters are a 400 (below), as is a bad URL.
    routerOptions: { maxParamLength: 1024 },
    clientErrorHandler: clientError,
    frameworkErrors: (error, request, reply) => {
      const err = new InvalidInput(error.message, [{ path: '', in: 'path', message: error.message }])
      // A SCIM client reads SCIM's errors, also for a URL that never reached a route.
      if (request.url.startsWith(`${SCIM_BASE}/`)) void sendScimError(reply, scimAnswerTo(err, { forbiddenStatus: config.FORBIDDEN_STATUS }))
      else void sendProblem(reply, answerTo(err))
    },
    // One log line per request (logging/access-log.ts), not Fastify's two; the request's id on each as `request_id`.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    forceCloseConnections: 'idle'
  }
}
