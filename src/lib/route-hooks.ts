import type { RouteOptions } from 'fastify'

type LifecycleHook = 'onRequest' | 'preValidation' | 'preHandler' | 'onSend'

/**
 * Puts a hook first among one route's own hooks of a kind (route hooks run after the app-wide ones). Plugins use it
 * from `onRoute` so that a request pays only for the hooks its route needs. A new array every time: the HEAD route
 * Fastify derives from a GET shares its options, and gets hooks of its own from its own `onRoute` pass.
 */
export function prependRouteHook(route: RouteOptions, kind: LifecycleHook, hook: (...args: never[]) => unknown): void {
  const existing = route[kind] as unknown
  const own = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]
  ;(route as unknown as Record<LifecycleHook, unknown>)[kind] = [hook, ...own]
}

/** Puts a hook last among one route's own hooks of a kind, after those the route and earlier plugins declared. */
export function appendRouteHook(route: RouteOptions, kind: LifecycleHook, hook: (...args: never[]) => unknown): void {
  const existing = route[kind] as unknown
  const own = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]
  ;(route as unknown as Record<LifecycleHook, unknown>)[kind] = [...own, hook]
}
