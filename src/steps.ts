import fp from 'fastify-plugin'
import type { FastifyInstance, RouteOptions } from 'fastify'
import { callerLookup } from './auth/caller.js'
import { consoleToken } from './console/session.js'
import { authenticateStep, authorizeStep } from './auth/steps.js'
import { multipartStep, noBodyStep } from './http/bodies.js'
import { conditionalGetStep } from './http/conditional.js'
import { canonicalIdsStep } from './http/ids.js'
import type { RoutePlan } from './http/methods.js'
import { DOCS_PREFIX } from './http/openapi.js'
import { idempotencyRecordStep, idempotencyStep } from './idempotency/steps.js'
import { rateLimiter } from './limits/step.js'

/** Fastify's request phases the steps use, in the order Fastify runs them. */
export const PHASES = ['onRequest', 'preValidation', 'preHandler', 'onSend'] as const
type Phase = typeof PHASES[number]

/** A route-level hook of a phase, as Fastify types it. */
type Hook<P extends Phase> = Exclude<NonNullable<RouteOptions[P]>, readonly unknown[]>

/**
 * A named step in its phase: the hook it gives a route, decided once as the route is registered, or none when the
 * route does not need it (a public route is not authorized, a POST has no ETag). `scope` is the route's plugin.
 */
export type Step = { [P in Phase]: { name: string; phase: P; hook: (route: RouteOptions, scope: FastifyInstance) => Hook<P> | undefined } }[Phase]

/**
 * The per-route steps, in the order a request meets them: the only place that order is written.
 * - authenticate: who the caller is, from the bearer token or the console's cookie (before any body is read); a route that needs a caller
 *   refuses here (and counts the refusal against the client address);
 * - rate-limit: one hit per request on the caller's window (the user, else the client address), before anything
 *   else can refuse it, so that requests refused at validation or authorization count as well;
 * - canonical-ids: ids in the path and the `id` filter as the client wrote them, before validation coerces them;
 * - multipart: a multipart body read into the same plain object every other encoding gives;
 * - no-body: a POST, PUT or PATCH that declares no body refuses fields sent to it, each unknown to it;
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
    { name: 'authenticate', phase: 'onRequest', hook: authenticateStep({ findCaller: callerLookup(app.db), publicPrefixes: [DOCS_PREFIX], onRefusal: limiter.refusal, otherToken: consoleToken }) },
    { name: 'rate-limit', phase: 'onRequest', hook: limiter.step },
    { name: 'canonical-ids', phase: 'preValidation', hook: canonicalIdsStep },
    { name: 'multipart', phase: 'preValidation', hook: multipartStep },
    { name: 'no-body', phase: 'preValidation', hook: noBodyStep },
    { name: 'authorize', phase: 'preHandler', hook: authorizeStep },
    { name: 'idempotency', phase: 'preHandler', hook: idempotencyStep(keys) },
    { name: 'conditional-get', phase: 'onSend', hook: conditionalGetStep },
    { name: 'idempotency-record', phase: 'onSend', hook: idempotencyRecordStep(keys) }
  ]
}

/** A route's own hooks of a phase, after the steps' hooks of that phase. */
const after = <H>(steps: H[], own: H | H[] | undefined): H[] => [...steps, ...(own === undefined ? [] : [own].flat() as H[])]

/**
 * Every route registered after this plugin, whatever plugin registers it, gets its steps as route-level hooks, ahead
 * of its own hooks of the same phase (Fastify runs a route's hooks in the order of its arrays). The routes as served
 * are listed in `app.routePlans`.
 */
async function steps(app: FastifyInstance): Promise<void> {
  app.decorateRequest('caller', null)
  const list = routeSteps(app)
  const plans: RoutePlan[] = []
  app.decorate('routePlans', plans)
  app.addHook('onRoute', function (this: FastifyInstance, route) {
    const given: string[] = []
    const hooks: { [P in Phase]: Hook<P>[] } = { onRequest: [], preValidation: [], preHandler: [], onSend: [] }
    const add = <P extends Phase>(list: Hook<P>[], name: string, hook: Hook<P> | undefined) => {
      if (!hook) return
      list.push(hook)
      given.push(name)
    }
    // One branch per phase, so that each hook keeps its phase's type.
    for (const step of list) {
      switch (step.phase) {
        case 'onRequest': add(hooks.onRequest, step.name, step.hook(route, this)); break
        case 'preValidation': add(hooks.preValidation, step.name, step.hook(route, this)); break
        case 'preHandler': add(hooks.preHandler, step.name, step.hook(route, this)); break
        case 'onSend': add(hooks.onSend, step.name, step.hook(route, this)); break
      }
    }
    route.onRequest = after(hooks.onRequest, route.onRequest)
    route.preValidation = after(hooks.preValidation, route.preValidation)
    route.preHandler = after(hooks.preHandler, route.preHandler)
    route.onSend = after(hooks.onSend, route.onSend)
    for (const method of [route.method].flat()) plans.push({ method, url: route.url, config: route.config ?? {}, steps: given })
  })
}

export default fp(steps, { name: 'steps', dependencies: ['database', 'limits', 'idempotency'] })
