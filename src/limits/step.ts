import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler, RouteOptions } from 'fastify'
import { RateLimited } from '../common/errors.js'
import type { Hit, WindowCounter } from './counters.js'

export interface RateLimitOptions {
  counter: WindowCounter
  max: number
  windowSeconds: number
}

/**
 * The general rate limit: `max` requests per caller (the user once authenticated, else the client address) per
 * window. The client address is the socket's unless TRUST_PROXY names the proxy, so a forged X-Forwarded-For picks
 * no fresh bucket. With Redis a request waits for one round trip, and an unreachable Redis lets requests through.
 */
export function rateLimiter(options: RateLimitOptions) {
  const windowMs = options.windowSeconds * 1000
  const detail = `Too many requests: at most ${options.max} per ${options.windowSeconds} s`
  // IETF httpapi RateLimit headers: the policy (quota q per window w seconds), and what is left of it (r) and for
  // how long (t), so that a client slows down before it meets a 429.
  const policy = `"default";q=${options.max};w=${options.windowSeconds}`

  const letThrough = (request: FastifyRequest, err: unknown) => {
    request.log.warn({ err }, 'rate limit: the shared counter failed; request let through')
    return undefined
  }
  /** The headers of a counted request, and the error to answer with when its key is over the limit. */
  const counted = (hit: Hit, reply: FastifyReply) => {
    reply.header('ratelimit-policy', policy)
    reply.header('ratelimit', `"default";r=${Math.max(0, options.max - hit.count)};t=${Math.max(1, Math.ceil(hit.ttlMs / 1000))}`)
    return hit.count > options.max ? new RateLimited(detail, hit.ttlMs) : undefined
  }

  /** Counts one request against a key: the error to answer with when that key is over the limit. */
  const count = async (key: string, request: FastifyRequest, reply: FastifyReply): Promise<RateLimited | undefined> => {
    try {
      return counted(await options.counter.hit(key, windowMs), reply)
    } catch (err) {
      return letThrough(request, err)
    }
  }

  const limit: onRequestAsyncHookHandler = async (request, reply) => {
    const refused = await count(request.caller ? `u${request.caller.id}` : `a${request.client}`, request, reply)
    if (refused) throw refused
  }

  return {
    /** The rate-limit step (after authentication, before validation), for every route but the health checks. */
    step: (route: RouteOptions) => (route.url.startsWith('/health/') ? undefined : limit),
    /**
     * A request refused at authentication never reaches the step: it counts against its address here, so a client
     * sending no token or bad ones is held to the limit of any anonymous caller.
     */
    refusal: (request: FastifyRequest, reply: FastifyReply) => count(`a${request.client}`, request, reply)
  }
}
