import type { FastifyContextConfig, FastifyInstance, RouteOptions } from 'fastify'

/** Fastify's request phases that route steps use, in the order Fastify runs them. */
export const PHASES = ['onRequest', 'preValidation', 'preHandler', 'onSend'] as const
export type Phase = typeof PHASES[number]

/** The hook a route takes in a phase, as Fastify types it. */
export type HookOf<P extends Phase> = Exclude<NonNullable<RouteOptions[P]>, readonly unknown[]>

/**
 * What a step gives one route, decided once when the route is registered: its hook for the step's phase, or nothing
 * when the route does not need the step (a public route is not authorized, a POST has no ETag), so a request pays
 * only for its own. `scope` is the plugin instance the route is registered in.
 */
export type RouteStep<P extends Phase> = (route: RouteOptions, scope: FastifyInstance) => HookOf<P> | undefined

/** A named step in its phase. */
export type Step = { [P in Phase]: { name: string; phase: P; step: RouteStep<P> } }[Phase]

/** A route as served: its method, URL, declared config and the steps it was given, in order. */
export interface RoutePlan {
  method: string
  url: string
  config: FastifyContextConfig
  steps: string[]
}

/** The route's own hooks of a phase, after the steps' hooks of that phase. */
function withSteps<H>(own: H | H[] | undefined, steps: H[]): H | H[] | undefined {
  if (steps.length === 0) return own
  return own === undefined ? steps : [...steps, ...(Array.isArray(own) ? own : [own])]
}

/**
 * Gives every route registered after this call its steps, in the order given: the one place that order is written
 * (the app's steps plugin), so registering plugins in another order, or adding routes anywhere, cannot change it. A
 * step's hook runs before the route's own hooks of the same phase. Each route gets new hook arrays (the HEAD route
 * Fastify derives from a GET copies the GET's options before they pass here, and passes on its own). The routes as
 * served are listed in `app.routePlans`.
 */
export function installLifecycle(app: FastifyInstance, steps: ReadonlyArray<Step>): void {
  const order = steps.map((s) => PHASES.indexOf(s.phase))
  if (order.some((at, i) => i > 0 && at < order[i - 1]!)) throw new Error('installLifecycle: steps must be listed in the order of their phases')
  const plans: RoutePlan[] = []
  app.decorate('routePlans', plans)
  app.addHook('onRoute', function (this: FastifyInstance, route) {
    const given: string[] = []
    const hooks: { [P in Phase]: HookOf<P>[] } = { onRequest: [], preValidation: [], preHandler: [], onSend: [] }
    const add = <P extends Phase>(name: string, list: HookOf<P>[], hook: HookOf<P> | undefined) => {
      if (!hook) return
      list.push(hook)
      given.push(name)
    }
    // One branch per phase, so that each hook keeps its phase's type.
    for (const entry of steps) {
      switch (entry.phase) {
        case 'onRequest': add(entry.name, hooks.onRequest, entry.step(route, this)); break
        case 'preValidation': add(entry.name, hooks.preValidation, entry.step(route, this)); break
        case 'preHandler': add(entry.name, hooks.preHandler, entry.step(route, this)); break
        case 'onSend': add(entry.name, hooks.onSend, entry.step(route, this)); break
      }
    }
    route.onRequest = withSteps(route.onRequest, hooks.onRequest)
    route.preValidation = withSteps(route.preValidation, hooks.preValidation)
    route.preHandler = withSteps(route.preHandler, hooks.preHandler)
    route.onSend = withSteps(route.onSend, hooks.onSend)
    for (const method of [route.method].flat()) plans.push({ method, url: route.url, config: route.config ?? {}, steps: given })
  })
}
