import type { IncomingMessage } from 'node:http'
import { AjvCompiler } from '@fastify/ajv-compiler'
import Fastify, { LogController } from 'fastify'
import type { BuildCompilerFromPool } from '@fastify/ajv-compiler'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from '../schemas/config.js'
import './types.js'
import adminPlugin from './plugins/admin.js'
import authPlugin from './plugins/auth.js'
import bodiesPlugin from './plugins/bodies.js'
import conditionalPlugin from './plugins/conditional.js'
import configPlugin from './plugins/config.js'
import dbPlugin from './plugins/db.js'
import errorsPlugin, { sendProblem } from './plugins/errors.js'
import { validationFailed } from './lib/errors.js'
import { LogBatch } from './lib/log-batch.js'
import idsPlugin from './plugins/ids.js'
import openapiPlugin, { DOCS_PREFIX } from './plugins/openapi.js'
import pressurePlugin from './plugins/pressure.js'
import throttlePlugin from './plugins/throttle.js'
import emailRoutes from './routes/emails.js'
import healthRoutes from './routes/health.js'
import tokenRoutes from './routes/tokens.js'
import userRoutes from './routes/users.js'

const OVERRIDABLE = new Set(['PUT', 'DELETE'])

/**
 * `POST` with `X-HTTP-Method-Override: PUT|DELETE` is routed as that method, so the override reaches the real
 * route with its own authorization and validation. Runs before routing, for real sockets and inject alike.
 */
function methodOverride(req: IncomingMessage): string {
  const override = req.headers['x-http-method-override']
  if (req.method === 'POST' && typeof override === 'string') {
    const method = override.trim().toUpperCase()
    if (OVERRIDABLE.has(method)) req.method = method
  }
  return req.url ?? '/'
}

/**
 * Query strings and paths are text, so their schemas coerce (`limit=5` is the integer 5); bodies are not coerced,
 * so a JSON number where a string is due is a 400, as it is in any other encoding's schema check.
 */
function validatorFactory(): BuildCompilerFromPool {
  const pool = AjvCompiler()
  return ((externalSchemas, ajvOptions) => {
    const coercing = pool(externalSchemas, ajvOptions)
    const noCoercion = { ...ajvOptions, customOptions: { ...ajvOptions?.customOptions, coerceTypes: false } }
    const strict = pool(externalSchemas, noCoercion as typeof ajvOptions)
    return (route: { httpPart?: string }) => (route.httpPart === 'body' ? strict : coercing)(route as never)
  }) as BuildCompilerFromPool
}

/** Characters of log lines gathered before they are written out, at most a second late. */
const LOG_BATCH_CHARS = 4096
const LOG_FLUSH_MS = 1000

/**
 * Standard output, batched: at `info` and above a busy service writes one line per request, and a write per line
 * would cost a system call per request. Lines are gathered up to LOG_BATCH_CHARS and written in one call, at
 * least every LOG_FLUSH_MS, when the app closes, and when the process exits. At `debug` and `trace`, for
 * watching a service live, every line is written at once.
 */
function bufferedStdout(level: Config['LOG_LEVEL']) {
  if (level === 'debug' || level === 'trace' || level === 'silent') return undefined
  return new LogBatch(LOG_BATCH_CHARS, LOG_FLUSH_MS)
}

export interface BuildOptions {
  /** Where logs go (stdout by default); tests capture them here. */
  logStream?: { write: (line: string) => void }
}

/** Builds the Roster app (it does not listen). */
export async function buildApp(config: Config, options: BuildOptions = {}) {
  const stdout = options.logStream ? undefined : bufferedStdout(config.LOG_LEVEL)
  const app = Fastify({
    logger: {
      level: config.LOG_LEVEL,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization'], censor: '[redacted]' },
      ...(options.logStream ? { stream: options.logStream } : stdout ? { stream: stdout } : {})
    },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: false } },
    schemaController: { compilersFactory: { buildValidator: validatorFactory() } },
    bodyLimit: config.BODY_LIMIT,
    trustProxy: config.TRUST_PROXY ?? false,
    rewriteUrl: methodOverride,
    requestTimeout: 15_000,
    connectionTimeout: 10_000,
    keepAliveTimeout: 10_000,
    return503OnClosing: true,
    // A percent-encoded address of 254 characters fits; longer path parameters are a 400 (below), as is a bad URL.
    routerOptions: { maxParamLength: 1024 },
    frameworkErrors: (error, _request, reply) =>
      sendProblem(reply, validationFailed(error.message, [{ path: '', in: 'path', message: error.message }])),
    // One log line per request (the onResponse hook below), not Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: 'idle'
  }).withTypeProvider<TypeBoxTypeProvider>()

  if (stdout) {
    app.addHook('onClose', (_app, done) => {
      stdout.close()
      done()
    })
  }
  if (config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace') {
    // Only at debug level: costs nothing otherwise. Lets an operator (and the shutdown test) see what is in flight.
    app.addHook('onRequest', (request, _reply, done) => {
      request.log.debug({ method: request.method, url: request.url }, 'request received')
      done()
    })
  }
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info({ method: request.method, url: request.url, statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 }, 'request')
    done()
  })

  await app.register(configPlugin, { config })
  await app.register(errorsPlugin)
  await app.register(pressurePlugin)
  await app.register(dbPlugin)
  await app.register(authPlugin, { publicPrefixes: [DOCS_PREFIX] })
  await app.register(throttlePlugin)
  await app.register(idsPlugin)
  await app.register(bodiesPlugin)
  await app.register(conditionalPlugin)
  await app.register(openapiPlugin)
  await app.register(adminPlugin)

  await app.register(healthRoutes)
  await app.register(tokenRoutes)
  await app.register(userRoutes)
  await app.register(emailRoutes)
  return app
}

export type App = Awaited<ReturnType<typeof buildApp>>
