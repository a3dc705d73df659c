import type { FastifyContextConfig } from 'fastify'

/** A route as served: its method, URL, declared config and the steps it was given, in order. */
export interface RoutePlan {
  method: string
  url: string
  config: FastifyContextConfig
  steps: string[]
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** A route URL as a pattern over request paths: `:name` is one segment, a trailing `*` anything. */
function pattern(url: string): RegExp {
  const body = url.split('/').map((segment) => (segment.startsWith(':') ? '[^/]+' : segment === '*' ? '.*' : escape(segment))).join('/')
  return new RegExp(`^${body}$`)
}

const ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']
const rank = (method: string) => (ORDER.includes(method) ? ORDER.indexOf(method) : ORDER.length)

/**
 * The methods served at a request path, from the routes as served (`app.routePlans`, read when first asked: every
 * route is registered by then). Asked only for requests no route matched, to tell 405 from 404.
 */
export function allowedMethods(plans: () => ReadonlyArray<RoutePlan>): (path: string) => string[] {
  let routes: Array<{ method: string; match: RegExp }> | undefined
  return (path) => {
    routes ??= plans().map((plan) => ({ method: plan.method, match: pattern(plan.url) }))
    const methods = new Set<string>()
    for (const route of routes) if (route.match.test(path)) methods.add(route.method)
    return [...methods].sort((a, b) => rank(a) - rank(b))
  }
}
