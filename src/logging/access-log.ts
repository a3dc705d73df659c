import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import pino from 'pino'
import type { LogSink } from './destination.js'

/**
 * A URL as the access log shows it: e-mail addresses (the `/users/email/{email}` lookup, the `email` filter) are
 * personal data and are not written to logs. Most URLs hold none, and pay one substring search.
 */
export function loggedUrl(url: string): string {
  if (!url.includes('email')) return url
  return url.replace(/(\/users\/email\/)[^/?#]+/, '$1[redacted]').replace(/([?&]email=)[^&#]*/g, '$1[redacted]')
}

/**
 * Renders the access line exactly as the logger would write `log.child({ reqId }).info({ method, url, statusCode,
 * ms }, 'request')`: the same fields in the same order (level, time, the logger's bindings, reqId, the request's
 * fields, msg), so that log readers see one format. Built by hand because it is the one line every request writes
 * (BENCHMARKS.md weighs it); only the URL is free text, escaped by JSON.stringify. test/logging/access-log.test.ts
 * holds it to pino's own line.
 */
export function accessLineRenderer(bindings: Record<string, unknown>) {
  const level = pino.levels.values.info ?? 30
  const bound = JSON.stringify(bindings)
  const fields = bound === '{}' ? '' : `,${bound.slice(1, -1)}`
  const head = `{"level":${level},"time":`
  return (time: number, reqId: string, method: string, url: string, statusCode: number, ms: number): string =>
    head + time + fields + ',"reqId":' + JSON.stringify(reqId) + ',"method":"' + method + '","url":' +
    JSON.stringify(loggedUrl(url)) + ',"statusCode":' + statusCode + ',"ms":' + ms + ',"msg":"request"}\n'
}

export interface AccessLogOptions {
  /** The log's destination: the line is rendered by hand and written there. Without one, through the logger. */
  sink?: LogSink | undefined
  /** The logger's bindings, which every line carries. */
  base: Record<string, unknown>
}

/** Whether the app's logger writes lines of `level`. */
const enabled = (app: FastifyInstance, level: 'debug' | 'info') => (pino.levels.values[app.log.level] ?? Infinity) <= (pino.levels.values[level] ?? 0)

/**
 * One access line per answered request (`onResponse`), at `info`. With a sink (the log's batched destination, or a
 * test's stream) the line is rendered by hand and written there; without one (`debug` and `trace`, where every
 * line goes out at once) it goes through the logger like any other line, and each request is also logged as it
 * arrives, so that an operator (and the shutdown test) sees what is in flight.
 */
async function accessLog(app: FastifyInstance, { sink, base }: AccessLogOptions): Promise<void> {
  if (enabled(app, 'debug')) {
    app.addHook('onRequest', (request, _reply, done) => {
      request.log.debug({ method: request.method, url: loggedUrl(request.url) }, 'request received')
      done()
    })
  }
  if (!enabled(app, 'info')) return
  const render = accessLineRenderer(base)
  const msOf = (reply: FastifyReply) => Math.round(reply.elapsedTime * 10) / 10
  app.addHook('onResponse', sink
    ? (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
        sink.write(render(Date.now(), request.id, request.method, request.url, reply.statusCode, msOf(reply)))
        done()
      }
    : (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
        request.log.info({ method: request.method, url: loggedUrl(request.url), statusCode: reply.statusCode, ms: msOf(reply) }, 'request')
        done()
      })
}

export default fp(accessLog, { name: 'access-log' })
