import pino from 'pino'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

/**
 * A URL as the access log shows it: e-mail addresses (the `/users/email/{email}` lookup, the `email` filter) are
 * personal data and are not written to logs. Most URLs hold none, and pay one substring search.
 */
export function loggedUrl(url: string): string {
  if (!url.includes('email')) return url
  return url.replace(/(\/users\/email\/)[^/?#]+/, '$1[redacted]').replace(/([?&]email=)[^&#]*/g, '$1[redacted]')
}

/** Where log lines go: the logger's own destination. */
export interface LogSink {
  write(line: string): void
}

/**
 * Renders the access line exactly as the logger would write `log.child({ reqId }).info({ method, url, statusCode,
 * ms }, 'request')`: the same fields in the same order (level, time, the logger's bindings, reqId, the request's
 * fields, msg), so that log readers see one format. Built by hand because it is the one line every request writes:
 * pino's generic path (a child logger's bindings, serialising an object key by key, redaction) cost about 13 000
 * instructions per request, a sixth of what Roster itself adds to a self-read (BENCHMARKS.md). Only the URL is
 * free text; it is escaped by JSON.stringify. test/http/access-log.test.ts holds it to pino's own line.
 */
export function accessLineRenderer(logger: FastifyBaseLogger) {
  const level = (logger as pino.Logger).levels.values.info
  const bindings = (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym] ?? ''
  const head = `{"level":${level},"time":`
  return (time: number, reqId: string, method: string, url: string, statusCode: number, ms: number): string =>
    head + time + bindings + ',"reqId":' + JSON.stringify(reqId) + ',"method":"' + method + '","url":' +
    JSON.stringify(loggedUrl(url)) + ',"statusCode":' + statusCode + ',"ms":' + ms + ',"msg":"request"}\n'
}

/**
 * One access line per answered request (`onResponse`), at `info`. With a sink (the log's batched destination, or a
 * test's stream) the line is rendered by hand and written there; without one (`debug` and `trace`, where every
 * line goes out at once) it goes through the logger like any other line.
 */
export function installAccessLog(app: FastifyInstance, sink: LogSink | undefined): void {
  if (!(app.log as pino.Logger).isLevelEnabled('info')) return
  const render = accessLineRenderer(app.log)
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
