import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { tokenHash } from '../accounts/secrets.js'
import { type DomainError, Forbidden, Unauthenticated } from '../common/errors.js'
import type { Cause } from '../events/record.js'
import type { RouteStep } from '../http/lifecycle.js'
import type { Caller, FindCaller } from './caller.js'
import { allows, AUTH_RULES, isAuthRule, type AuthRule } from './rules.js'

export interface AuthenticateOptions {
  /** The caller a token hash belongs to: one indexed query. */
  findCaller: FindCaller
  /** Routes under these prefixes are public without declaring it (routes added by third-party plugins). */
  publicPrefixes: string[]
  /**
   * Runs when a request is refused at authentication: it may answer with an error of its own (a 429) instead, at once
   * or with a promise that never rejects.
   */
  onRefusal?: (request: FastifyRequest, reply: FastifyReply) => DomainError | undefined | Promise<DomainError | undefined>
}

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined
  const m = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header)
  return m?.[1]
}

/**
 * The authenticate step: reads each route's rule once, when it is registered (and refuses to register a route
 * without one), and looks the bearer token up on every request, before any body is read. A route that needs a
 * caller refuses the rest: with onRefusal's answer (a 429) if it gives one, else 401. A lookup that answers at once
 * (SQLite) lets the request go on at once: the step is a callback hook, so that no promise stands between it and the
 * next step.
 */
export function authenticateStep(options: AuthenticateOptions): RouteStep<'onRequest'> {
  return (route) => {
    const declared = route.config?.auth
    const rule: AuthRule | undefined = declared ?? (options.publicPrefixes.some((p) => route.url.startsWith(p)) ? 'public' : undefined)
    if (!isAuthRule(rule)) {
      throw new Error(`Route ${String(route.method)} ${route.url} must declare config.auth (one of ${AUTH_RULES.join(', ')})`)
    }
    route.config = { ...route.config, auth: rule }
    const isPublic = rule === 'public'
    return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const refuse = (answer: DomainError | undefined) =>
        done(answer ?? new Unauthenticated(request.headers.authorization ? 'The bearer token is invalid, expired or revoked' : undefined))
      const admit = (caller: Caller | undefined) => {
        request.caller = caller ?? null
        if (isPublic || caller) return done()
        const refused = options.onRefusal?.(request, reply)
        if (refused instanceof Promise) refused.then(refuse, done)
        else refuse(refused)
      }
      const token = bearerToken(request.headers.authorization)
      if (!token) return admit(undefined)
      let found
      try {
        found = options.findCaller(tokenHash(token))
      } catch (err) {
        return done(err instanceof Error ? err : new Error(String(err)))
      }
      if (found instanceof Promise) found.then(admit, done)
      else admit(found)
    }
  }
}

/** The authorize step: the route's rule against the caller and the `user_id` it names (validated by then). */
export const authorizeStep: RouteStep<'preHandler'> = (route) => {
  const rule = route.config?.auth
  if (!rule || rule === 'public') return undefined
  return (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void) => {
    const target = (request.params as { user_id?: number }).user_id
    if (allows(rule, request.caller, target)) return done()
    done(request.caller ? new Forbidden() : new Unauthenticated())
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
  return { actor: { type, id: caller.id }, requestId: request.id, base, recorded }
}
