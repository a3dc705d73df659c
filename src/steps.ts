import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { callerLookup } from './auth/caller.js'
import { authenticateStep, authorizeStep } from './auth/steps.js'
import { multipartStep } from './http/bodies.js'
import { conditionalGetStep } from './http/conditional.js'
import { canonicalIdsStep } from './http/ids.js'
import { installLifecycle, type Step } from './http/lifecycle.js'
import { DOCS_PREFIX } from './http/openapi.js'
import { idempotencyRecordStep, idempotencyStep } from './idempotency/steps.js'
import { rateLimiter } from './limits/step.js'

/**
 * The per-route steps, in the order a request meets them: the only place that order is written.
 * - authenticate: who the caller is, from the bearer token (before any body is read); a route that needs a caller
 *   refuses here (and counts the refusal against the client address);
 * - rate-limit: one hit per request on the caller's window (the user, else the client address), before anything
 *   else can refuse it, so that requests refused at validation or authorization count as well;
 * - canonical-ids: ids in the path and the `id` filter as the client wrote them, before validation coerces them;
 * - multipart: a multipart body read into the same plain object every other encoding gives;
 * - authorize: the route's declared rule (`config.auth`) against the caller and the target user;
 * - idempotency: on POSTs that create or send (`config.idempotent`), a retry with the same Idempotency-Key answers
 *   the first answer again, once the request is known to be allowed and valid;
 * - conditional-get: ETag and 304 on GET and HEAD answers;
 * - idempotency-record: the answer of a request that took an Idempotency-Key, kept before it goes out.
 */
export function routeSteps(app: FastifyInstance): Step[] {
  const config = app.config
  const limiter = rateLimiter({ counter: app.limits.requests, max: config.RATE_LIMIT_MAX, windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS })
  const keys = app.idempotencyKeys
  return [
    { name: 'authenticate', phase: 'onRequest', step: authenticateStep({ findCaller: callerLookup(app.db), publicPrefixes: [DOCS_PREFIX], onRefusal: limiter.refusal }) },
    { name: 'rate-limit', phase: 'onRequest', step: limiter.step },
    { name: 'canonical-ids', phase: 'preValidation', step: canonicalIdsStep },
    { name: 'multipart', phase: 'preValidation', step: multipartStep },
    { name: 'authorize', phase: 'preHandler', step: authorizeStep },
    { name: 'idempotency', phase: 'preHandler', step: idempotencyStep(keys) },
    { name: 'conditional-get', phase: 'onSend', step: conditionalGetStep },
    { name: 'idempotency-record', phase: 'onSend', step: idempotencyRecordStep(keys) }
  ]
}

/** Every route registered after this plugin gets its steps (http/lifecycle.ts), whatever plugin registers it. */
async function steps(app: FastifyInstance): Promise<void> {
  app.decorateRequest('caller', null)
  installLifecycle(app, routeSteps(app))
}

export default fp(steps, { name: 'steps', dependencies: ['database', 'limits', 'idempotency'] })
