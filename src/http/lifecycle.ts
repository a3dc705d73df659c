import type { FastifyInstance, RouteOptions } from 'fastify'
import type { AuthRule } from '../auth/rules.js'

/** Fastify's request phases that route steps use, in the order Fastify runs them. */
export const PHASES = ['onRequest', 'preValidation', 'preHandler', 'onSend'] as const
export type Phase = typeof PHASES[number]

/**
 * The per-route steps, in the order a request meets them. This list is the only place that order is written:
 * registering plugins in another order, or adding routes anywhere, cannot change it.
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
 * A step's hook runs before the route's own hooks of the same phase (a key path's body normalisation).
 */
export const LIFECYCLE = [
  { step: 'authenticate', phase: 'onRequest' },
  { step: 'rate-limit', phase: 'onRequest' },
  { step: 'canonical-ids', phase: 'preValidation' },
  { step: 'multipart', phase: 'preValidation' },
  { step: 'authorize', phase: 'preHandler' },
  { step: 'idempotency', phase: 'preHandler' },
  { step: 'conditional-get', phase: 'onSend' },
  { step: 'idempotency-record', phase: 'onSend' }
] as const satisfies ReadonlyArray<{ step: string; phase: Phase }>

export type StepName = typeof LIFECYCLE[number]['step']

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- each phase has its own hook signature
export type RouteHook = (...args: any[]) => unknown

/**
 * What a step gives one route, decided once when the route is registered: its hook, or nothing when the route does
 * not need the step (a public route is not authorized, a POST has no ETag), so a request pays only for its own.
 * `scope` is the plugin instance the route is registered in.
 */
export type RouteStep = (route: RouteOptions, scope: FastifyInstance) => RouteHook | undefined

/** A route as served: its method, URL, authorization rule and the steps it was given, in order. */
export interface RoutePlan {
  method: string
  url: string
  rule: AuthRule
  steps: StepName[]
}

function ownHooks(route: RouteOptions, phase: Phase): RouteHook[] {
  const existing = route[phase] as unknown
  return existing === undefined ? [] : Array.isArray(existing) ? existing : [existing as RouteHook]
}

/**
 * Gives every route registered after this call its steps, in LIFECYCLE order. Each route gets new hook arrays (the
 * HEAD route Fastify derives from a GET copies the GET's options before they pass here, and passes on its own).
 */
export function installLifecycle(app: FastifyInstance, steps: Record<StepName, RouteStep>): void {
  const plans: RoutePlan[] = []
  app.decorate('routePlans', plans)
  app.addHook('onRoute', function (this: FastifyInstance, route) {
    const given: StepName[] = []
    const byPhase = new Map<Phase, RouteHook[]>()
    for (const { step, phase } of LIFECYCLE) {
      const hook = steps[step](route, this)
      if (!hook) continue
      given.push(step)
      byPhase.set(phase, [...(byPhase.get(phase) ?? []), hook])
    }
    const writable = route as unknown as Record<Phase, RouteHook[]>
    for (const [phase, hooks] of byPhase) writable[phase] = [...hooks, ...ownHooks(route, phase)]
    const rule = route.config?.auth
    if (!rule) throw new Error(`Route ${String(route.method)} ${route.url} has no authorization rule`)
    for (const method of [route.method].flat()) plans.push({ method, url: route.url, rule, steps: given })
  })
}
