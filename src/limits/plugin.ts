import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { WindowCounter } from './counters.js'
import { Limits } from './limits.js'
import { LoginGuard } from './login-guard.js'
import { openCounters } from './store.js'

declare module 'fastify' {
  interface FastifyInstance {
    limits: {
      /** The general rate limit's counter (the rate-limit step). */
      requests: WindowCounter
      /** Limits on what costs more than a request: failed checks and mail (Limits over their own counters). */
      events: Limits
      /** The failed-check limits of passwords and mailed tokens. */
      guard: LoginGuard
    }
  }
}

/**
 * The counters behind every limit: in memory, or shared through Redis (RATE_LIMIT_REDIS_URL) by every instance. Opened
 * with the app, closed with it.
 */
async function limits(app: FastifyInstance): Promise<void> {
  const config = app.config
  const warn = (details: object, message: string) => app.log.warn(details, message)
  const counters = await openCounters({ redisUrl: config.RATE_LIMIT_REDIS_URL, keyPrefix: config.REDIS_KEY_PREFIX, warn })
  app.addHook('onClose', () => counters.close())
  const events = new Limits(counters.logins, warn)
  const guard = new LoginGuard(events, {
    maxPerPair: config.LOGIN_MAX_FAILURES,
    maxPerClient: config.LOGIN_MAX_FAILURES_PER_CLIENT,
    maxPerAccount: config.LOGIN_MAX_FAILURES_PER_ACCOUNT,
    windowMs: config.LOGIN_WINDOW_SECONDS * 1000
  })
  app.decorate('limits', { requests: counters.requests, events, guard })
}

export default fp(limits, { name: 'limits' })
