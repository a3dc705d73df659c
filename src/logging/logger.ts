import { hostname } from 'node:os'
import type { FastifyServerOptions } from 'fastify'
import type { Config } from '../../schemas/config.js'
import { stdoutDestination, type LogSink } from './destination.js'

/** Header values never written to the log. */
const REDACTED = ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization']

/**
 * The logger's options and where its lines go: a test's stream when given; else standard output, batched at `info`
 * and above (destination.ts), and written line by line at `debug` and `trace`, for watching a service live. `sink`
 * is where the access log writes its hand-rendered lines (none at `debug` and `trace`: they go through the logger);
 * `close` writes out what is gathered when the app closes.
 */
export function logging(level: Config['LOG_LEVEL'], stream?: LogSink) {
  const batched = stream === undefined && !['debug', 'trace', 'silent'].includes(level) ? stdoutDestination() : undefined
  const sink = stream ?? batched
  // pino's own default bindings, named here so that the hand-rendered access line carries the same.
  const base = { pid: process.pid, hostname: hostname() }
  const logger: FastifyServerOptions['logger'] = {
    level,
    base,
    redact: { paths: REDACTED, censor: '[redacted]' },
    ...(sink ? { stream: sink } : {})
  }
  return { logger, base, sink, close: () => batched?.close() }
}
