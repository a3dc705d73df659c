import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { Redis } from 'ioredis'
import { MemoryCounter, RedisCounter, type Hit, type WindowCounter } from '../lib/counters.js'
import { ApiError } from '../lib/errors.js'
import { addRouteHook } from '../lib/route-hooks.js'
import { normalizeAddress } from '../lib/text.js'

const tooMany = (ttlMs: number, detail: string) =>
  new ApiError(429, 'RATE_LIMITED', detail, { headers: { 'retry-after': String(Math.max(1, Math.ceil(ttlMs / 1000))) } })

/** Failed logins, counted per account and per client address. */
export interface LoginGuard {
  /** 429 while either counter is over its limit: checked before the password, so it costs no hashing. */
  check(email: string, request: FastifyRequest): Promise<void>
  failed(email: string, request: FastifyRequest): Promise<void>
  succeeded(email: string): Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    loginGuard: LoginGuard
  }
}

/**
 * Abuse limits: a general rate limit per caller (the user once authenticated, else the client address) and a
 * failed-login guard. In memory by default; shared through Redis when RATE_LIMIT_REDIS_URL is set. The client
 * address is the socket's unless TRUST_PROXY names the proxy, so a forged X-Forwarded-For picks no fresh bucket.
 */
export default fp(async (app) => {
  const config = app.config
  let redis: Redis | undefined
  if (config.RATE_LIMIT_REDIS_URL) {
    redis = new Redis(config.RATE_LIMIT_REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: true, lazyConnect: true })
    redis.on('error', (err) => app.log.warn({ err: err.message }, 'redis'))
    await redis.connect()
  }
  const counter: WindowCounter = redis ? new RedisCounter(redis, `${config.REDIS_KEY_PREFIX}login:`) : new MemoryCounter()
  const requests: WindowCounter = redis ? new RedisCounter(redis, `${config.REDIS_KEY_PREFIX}rl:`) : new MemoryCounter()
  app.addHook('onClose', async () => {
    counter.close()
    requests.close()
    if (redis) await redis.quit().catch(() => redis?.disconnect())
  })

  // The general limit: RATE_LIMIT_MAX requests per caller per window, counted after authorization (a request
  // refused there is answered before it; one refused at authentication is counted against its address, below).
  // Health checks are never limited. With memory counters a request passes synchronously; with Redis it waits for
  // one round trip, and an unreachable Redis lets requests through.
  const limitMax = config.RATE_LIMIT_MAX
  const limitWindowMs = config.RATE_LIMIT_WINDOW_SECONDS * 1000
  const limitDetail = `Too many requests: at most ${limitMax} per ${config.RATE_LIMIT_WINDOW_SECONDS} s`
  const verdict = (hit: Hit) => (hit.count > limitMax ? tooMany(hit.ttlMs, limitDetail) : undefined)
  /** Counts one request against a key: the error to answer with when that key is over the limit. */
  const count = (key: string, request: FastifyRequest): ApiError | undefined | Promise<ApiError | undefined> => {
    const hit = requests.hit(key, limitWindowMs)
    if (!(hit instanceof Promise)) return verdict(hit)
    return hit.then(verdict, (err: unknown) => {
      request.log.warn({ err }, 'rate limit: the shared counter failed; request let through')
      return undefined
    })
  }
  const rateLimit = (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void) => {
    const answer = count(request.caller ? `u${request.caller.id}` : `a${request.ip}`, request)
    if (answer instanceof Promise) void answer.then(done)
    else done(answer)
  }
  app.addHook('onRoute', (route) => {
    if (route.url.startsWith('/health/')) return
    addRouteHook(route, 'preHandler', rateLimit, 'last') // after authorization
  })
  // A request refused at authentication never reaches that step: it counts against its address here, so a client
  // sending no token or bad ones is held to the limit of any anonymous caller.
  app.onAuthRefusal((request) => count(`a${request.ip}`, request))

  const windowMs = config.LOGIN_WINDOW_SECONDS * 1000
  const accountKey = (email: string) => `acct:${normalizeAddress(email)}`
  const clientKey = (request: FastifyRequest) => `addr:${request.ip}`
  const safely = async <T>(what: string, fn: () => T | Promise<T>): Promise<T | undefined> => {
    try {
      return await fn()
    } catch (err) {
      app.log.warn({ err }, `login guard: ${what} failed`)
      return undefined
    }
  }

  app.decorate('loginGuard', {
    async check(email, request) {
      const [account, client] = await Promise.all([
        safely('check', () => counter.peek(accountKey(email))),
        safely('check', () => counter.peek(clientKey(request)))
      ])
      if (account && account.count >= config.LOGIN_MAX_FAILURES) {
        throw tooMany(account.ttlMs, 'Too many failed logins for this account; try again later')
      }
      if (client && client.count >= config.LOGIN_MAX_FAILURES_PER_CLIENT) {
        throw tooMany(client.ttlMs, 'Too many failed logins from this client; try again later')
      }
    },
    async failed(email, request) {
      await Promise.all([
        safely('count', () => counter.hit(accountKey(email), windowMs)),
        safely('count', () => counter.hit(clientKey(request), windowMs))
      ])
    },
    async succeeded(email) {
      await safely('clear', () => counter.clear(accountKey(email)))
    }
  } satisfies LoginGuard)
}, { name: 'throttle', dependencies: ['config', 'auth'], fastify: '5.x' })
