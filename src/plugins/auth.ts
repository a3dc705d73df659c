import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { forbidden, unauthenticated } from '../lib/errors.js'
import { addRouteHook } from '../lib/route-hooks.js'
import { tokenHash } from '../lib/secrets.js'
import { callerLookup } from '../repositories/tokens.js'
import type { AuthRefusalStep, AuthRule } from '../types.js'

const RULES = new Set<AuthRule>(['public', 'caller', 'self-or-admin', 'owner', 'admin'])

export interface RouteRule {
  method: string
  url: string
  rule: AuthRule
}

export interface AuthOptions {
  /** Routes under these prefixes are public without declaring it (routes added by third-party plugins). */
  publicPrefixes?: string[]
}

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined
  const m = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header)
  return m?.[1]
}

/** Whether the caller passes a route's rule; params are validated by then, so `user_id` is a number. */
export function allows(rule: AuthRule, request: FastifyRequest): boolean {
  const caller = request.caller
  if (rule === 'public') return true
  if (!caller) return false
  const target = (request.params as { user_id?: number }).user_id
  switch (rule) {
    case 'caller': return true
    case 'admin': return caller.role === 'admin'
    case 'self-or-admin': return caller.role === 'admin' || target === caller.id
    case 'owner': return target === caller.id
    default: return false
  }
}

/**
 * Authentication in onRequest (before any body is read) and authorization in preHandler, from the rule each route
 * declares in `config.auth`. A route without a rule cannot be registered; an unknown rule refuses everyone. The
 * rule is read once, when the route is registered: each route gets the two hooks its rule needs, so a request
 * pays for no lookup of its route's options and a public route for no authorization step.
 */
export default fp<AuthOptions>(async (app, options) => {
  const publicPrefixes = options.publicPrefixes ?? []
  app.decorateRequest('caller', null)
  const findCaller = callerLookup(app.db)
  const catalogue: RouteRule[] = []
  app.decorate('routeRules', catalogue)
  const refusalSteps: AuthRefusalStep[] = []
  app.decorate('onAuthRefusal', (step: AuthRefusalStep) => { refusalSteps.push(step) })

  const authenticate = (rule: AuthRule) => async (request: FastifyRequest) => {
    const token = bearerToken(request.headers.authorization)
    if (token) request.caller = (await findCaller(tokenHash(token))) ?? null
    if (rule !== 'public' && !request.caller) {
      for (const step of refusalSteps) {
        const answer = await step(request)
        if (answer) throw answer
      }
      throw unauthenticated(request.headers.authorization ? 'The bearer token is invalid, expired or revoked' : undefined)
    }
  }
  const authorize = (rule: AuthRule) => (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void) => {
    if (allows(rule, request)) return done()
    done(request.caller ? forbidden() : unauthenticated())
  }

  app.addHook('onRoute', (route) => {
    const declared = route.config?.auth
    const rule = declared ?? (publicPrefixes.some((p) => route.url.startsWith(p)) ? 'public' : undefined)
    if (!rule || !RULES.has(rule)) {
      throw new Error(`Route ${String(route.method)} ${route.url} must declare config.auth (one of ${[...RULES].join(', ')})`)
    }
    route.config = { ...route.config, auth: rule }
    for (const method of [route.method].flat()) catalogue.push({ method, url: route.url, rule })
    addRouteHook(route, 'onRequest', authenticate(rule))
    if (rule !== 'public') addRouteHook(route, 'preHandler', authorize(rule))
  })
}, { name: 'auth', dependencies: ['db', 'errors'], fastify: '5.x' })
