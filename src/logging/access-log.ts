import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import pino from 'pino'

/**
 * A URL as the access log shows it: e-mail addresses (the `/users/email/{email}` lookup, the `email` filter) are
 * personal data and are not written to logs. Most URLs hold none, and pay one substring search.
 */
export function loggedUrl(url: string): string {
  if (!url.includes('email')) return url
  return url.replace(/(\/users\/email\/)[^/?#]+/, '$1[redacted]').replace(/([?&]email=)[^&#]*/g, '$1[redacted]')
}

/** Whether the app's logger writes lines of `level`. */
const enabled = (app: FastifyInstance, level: 'debug' | 'info') => (pino.levels.values[app.log.level] ?? Infinity) <= (pino.levels.values[level] ?? 0)

/**
 * One access line per answered request (`onResponse`), at `info`, through the request's own logger (its `request_id`
 * bound): method, URL with addresses redacted, status, milliseconds, the client as every per-client limit keys it,
 * and the caller's user id when it was authenticated. At `debug` and `trace` each request is also
 * logged as it arrives, so that an operator (and the shutdown test) sees what is in flight.
 */
async function accessLog(app: FastifyInstance): Promise<void> {
  if (enabled(app, 'debug')) {
    app.addHook('onRequest', async (request) => {
      request.log.debug({ method: request.method, url: loggedUrl(request.url) }, 'request received')
    })
  }
  if (!enabled(app, 'info')) return
  app.addHook('onResponse', async (request: FastifyRequest, reply: FastifyReply) => {
    request.log.info({
      method: request.method, url: loggedUrl(request.url), statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10,
      client: request.client, user_id: request.caller?.id
    }, 'request')
  })
}

export default fp(accessLog, { name: 'access-log' })
