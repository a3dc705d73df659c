import type { FastifyServerOptions } from 'fastify'
import type { Config } from '../../schemas/config.js'
import { stdoutDestination, type LogSink } from './destination.js'

/** Header values never written to the log. */
const REDACTED = ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization']

/**
 * The logger's options and where its lines go: a test's stream when given; else standard output, batched at `info`
 * and above (destination.ts), and written line by line at `debug` and `trace`, for watching a service live. `close`
 * writes out what is gathered when the app closes.
 */
export function logging(level: Config['LOG_LEVEL'], stream?: LogSink) {
  const batched = stream === undefined && !['debug', 'trace', 'silent'].includes(level) ? stdoutDestination() : undefined
  const sink = stream ?? batched
  const logger: FastifyServerOptions['logger'] = {
    level,
    redact: { paths: REDACTED, censor: '[redacted]' },
    ...(sink ? { stream: sink } : {})
  }
  return { logger, close: () => batched?.close() }
}
