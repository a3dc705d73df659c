import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler, preHandlerAsyncHookHandler, RouteOptions } from 'fastify'
import { tokenHash } from '../accounts/secrets.js'
import { type DomainError, Forbidden, Unauthenticated } from '../common/errors.js'
import type { Cause } from '../events/record.js'
import { scimTokenLookup, type Caller, type FindCaller } from './caller.js'
import { allows, AUTH_RULES, isAuthRule, type AuthRule } from './rules.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The SCIM token a /scim/v2 request came with (routes of the `scim` rule only). */
    scimToken?: { id: number } | undefined
  }
}

export interface AuthenticateOptions {
  /** The caller a token hash belongs to: one indexed query. */
  findCaller: FindCaller
  /** Routes under these prefixes are public without declaring it (routes added by third-party plugins). */
  publicPrefixes: string[]
  /** Runs when a request is refused at authentication: it may answer with an error of its own (a 429) instead. */
  onRefusal?: (request: FastifyRequest, reply: FastifyReply) => Promise<DomainError | undefined>
  /** Where else a request without a bearer token may carry one (the console's cookie). */
  otherToken?: (request: FastifyRequest) => string | undefined
}

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined
  const m = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header)
  return m?.[1]
}

/**
 * The authenticate step: reads each route's rule once, when it is registered (and refuses to register a route
 * without one), and looks the bearer token up on every request, before any body is read. A route that needs a
 * caller refuses the rest: with onRefusal's answer (a 429) if it gives one, else 401.
 */
export function authenticateStep(options: AuthenticateOptions): (route: RouteOptions, scope?: FastifyInstance) => onRequestAsyncHookHandler {
  return (route, scope) => {
    const declared = route.config?.auth
    const rule: AuthRule | undefined = declared ?? (options.publicPrefixes.some((p) => route.url.startsWith(p)) ? 'public' : undefined)
    if (!isAuthRule(rule)) {
      throw new Error(`Route ${String(route.method)} ${route.url} must declare config.auth (one of ${AUTH_RULES.join(', ')})`)
    }
    route.config = { ...route.config, auth: rule }
    const isPublic = rule === 'public'
    // Only the routes of the `scim` rule know SCIM tokens: anywhere else one is an unknown token.
    const findScimToken = rule === 'scim' && scope ? scimTokenLookup(scope.db) : undefined
    return async (request, reply) => {
      const token = bearerToken(request.headers.authorization) ?? (request.headers.authorization ? undefined : options.otherToken?.(request))
      const hash = token ? tokenHash(token) : undefined
      const caller = hash ? await options.findCaller(hash) : undefined
      request.caller = caller ?? null
      if (isPublic || caller) return
      const scimId = hash && findScimToken ? await findScimToken(hash) : undefined
      if (scimId !== undefined) {
        request.scimToken = { id: scimId }
        return
      }
      throw (await options.onRefusal?.(request, reply)) ??
        new Unauthenticated(request.headers.authorization ? 'The bearer token is invalid, expired or revoked' : undefined)
    }
  }
}

/** The authorize step: the route's rule against the caller and the `user_id` it names (validated by then). */
export function authorizeStep(route: RouteOptions): preHandlerAsyncHookHandler | undefined {
  const rule = route.config?.auth
  if (!rule || rule === 'public') return undefined
  return async (request) => {
    if (rule === 'scim' && request.scimToken) return
    const target = (request.params as { user_id?: number }).user_id
    if (!allows(rule, request.caller, target)) throw request.caller ? new Forbidden() : new Unauthenticated()
  }
}

/** The client a request that causes mail counts against (AddressMail.allow): none for an admin's request. */
export function mailingClient(request: FastifyRequest): string | null {
  return request.caller?.role === 'admin' ? null : request.client
}

/** The authenticated caller of a route whose rule requires one (the authenticate step has refused everyone else). */
export function callerOf(request: FastifyRequest): Caller {
  if (!request.caller) throw new Unauthenticated()
  return request.caller
}

/**
 * What a request's changes are recorded as caused by: the caller acting on itself (`user`), an admin acting on
 * another user or on none in particular (`admin`), or nobody signed in, or a public route proved by what the request
 * carries (`anonymous`); with the request's id.
 */
export function causeOf(request: FastifyRequest): Cause {
  const caller = request.caller
  const target = (request.params as { user_id?: number } | undefined)?.user_id
  const base = request.server.config.PUBLIC_URL ?? ''
  // On a public route the proof is the request's own (a mailed token, a code), not the caller's token: anonymous,
  // unless an admin acts there as an admin (creating a user).
  const anonymous = !caller || (request.routeOptions.config.auth === 'public' && caller.role !== 'admin')
  const recorded = () => { request.wroteEvents = true }
  if (anonymous) return { actor: { type: 'anonymous', id: null }, requestId: request.id, base, recorded }
  const type = caller.role === 'admin' && target !== caller.id ? 'admin' : 'user'
  return { actor: { type, id: caller.id }, requestId: request.id, base, recorded, token: caller.tokenHash }
}
