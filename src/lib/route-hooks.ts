import type { RouteOptions } from 'fastify'

type LifecycleHook = 'onRequest' | 'preValidation' | 'preHandler' | 'onSend'
type Hook = (...args: never[]) => unknown

/** A route's own hooks of a kind, as a new array (never the one in its options). */
function ownHooks(route: RouteOptions, kind: LifecycleHook): unknown[] {
  const existing = route[kind] as unknown
  return existing === undefined ? [] : Array.isArray(existing) ? [...existing] : [existing]
}

/**
 * Adds a hook to one route's own hooks of a kind (route hooks run after the app-wide ones): `first`, before those
 * the route and earlier plugins declared, or `last`, after them. Plugins use it from `onRoute` so that a request
 * pays only for the hooks its route needs. A new array every time: the HEAD route Fastify derives from a GET shares
 * its options, and gets hooks of its own from its own `onRoute` pass.
 */
export function addRouteHook(route: RouteOptions, kind: LifecycleHook, hook: Hook, at: 'first' | 'last' = 'first'): void {
  const hooks = ownHooks(route, kind)
  if (at === 'first') hooks.unshift(hook)
  else hooks.push(hook)
  ;(route as unknown as Record<LifecycleHook, unknown>)[kind] = hooks
}
