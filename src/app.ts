import type { IncomingMessage } from 'node:http'
import { AjvCompiler } from '@fastify/ajv-compiler'
import Fastify, { LogController } from 'fastify'
import type { BuildCompilerFromPool } from '@fastify/ajv-compiler'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from '../schemas/config.js'
import './types.js'
import { callerLookup } from './auth/repository.js'
import authRoutes from './auth/routes.js'
import { AuthService } from './auth/service.js'
import { sharedSecret } from './database/app-secrets.js'
import { createDatabase, migrateToLatest, ping } from './database/index.js'
import emailRoutes from './emails/routes.js'
import { EmailsService } from './emails/service.js'
import healthRoutes from './health/routes.js'
import { authenticateStep, authorizeStep } from './http/authenticate.js'
import { installBodies, multipartStep } from './http/bodies.js'
import { installUnreadBodies } from './http/unread-body.js'
import { conditionalGetStep } from './http/conditional.js'
import { installClientKeys } from './http/client-address.js'
import { installCors } from './http/cors.js'
import { CursorCodec } from './http/cursor.js'
import { canonicalIdsStep } from './http/ids.js'
import { idempotencyRecordStep, idempotencyStep } from './http/idempotency.js'
import { allowedMethods } from './http/methods.js'
import { installAccessLog, loggedUrl } from './http/access-log.js'
import { IdempotencyKeys } from './idempotency/service.js'
import { installLifecycle } from './http/lifecycle.js'
import { LogBatch } from './http/log-batch.js'
import { DOCS_PREFIX, installOpenApi } from './http/openapi.js'
import { InvalidInput } from './common/errors.js'
import { answerTo, clientError, installProblems, sendProblem } from './http/problems.js'
import { OutageLog } from './http/outage.js'
import { installLoadShedding } from './http/pressure.js'
import { rateLimiter } from './http/rate-limit.js'
import { LoginGuard } from './limits/login-guard.js'
import { openCounters } from './limits/store.js'
import { Throttle } from './limits/throttle.js'
import { MailDeliverer, type DelivererOptions } from './mail/deliverer.js'
import { logTransport, smtpTransport } from './mail/transports.js'
import sessionRoutes from './sessions/routes.js'
import { SessionsService } from './sessions/service.js'
import userRoutes from './users/routes.js'
import { UsersService } from './users/service.js'
import { AddressMail } from './verification/address-mail.js'
import verificationRoutes from './verification/routes.js'
import { VerificationService } from './verification/service.js'

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

/**
 * The least time a password reset request takes to answer: long enough to cover writing the token and its mail,
 * so that the answer's timing does not tell whether the address belongs to anyone.
 */
const RESET_ANSWER_MS = 100

export interface BuildOptions {
  /** Where logs go (stdout by default); tests capture them here. */
  logStream?: { write: (line: string) => void }
  /** Timings of the mail deliverer (polling, retries); tests shorten them. */
  mail?: Partial<DelivererOptions>
}

/**
 * Builds the Roster app (it does not listen): the database and the limits' store, the services over them, the
 * HTTP machinery (errors, bodies, the route lifecycle, the OpenAPI document), then the features' routes.
 */
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
    clientErrorHandler: clientError,
    frameworkErrors: (error, _request, reply) =>
      sendProblem(reply, answerTo(new InvalidInput(error.message, [{ path: '', in: 'path', message: error.message }]))),
    // One log line per request (http/access-log.ts), not Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: 'idle'
  }).withTypeProvider<TypeBoxTypeProvider>()

  // First of the app-wide hooks: a request pipelined behind an answer that closes its connection is never served.
  installUnreadBodies(app)
  if (stdout) {
    app.addHook('onClose', (_app, done) => {
      stdout.close()
      done()
    })
  }
  if (config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace') {
    // Only at debug level: costs nothing otherwise. Lets an operator (and the shutdown test) see what is in flight.
    app.addHook('onRequest', (request, _reply, done) => {
      request.log.debug({ method: request.method, url: loggedUrl(request.url) }, 'request received')
      done()
    })
  }
  app.addHook('onRequest', (request, reply, done) => {
    // Answers are JSON or problem+json, never to be sniffed into something a browser would run.
    reply.header('x-content-type-options', 'nosniff')
    // A content type on a request without a body (a DELETE from a client that sets one on everything) names no
    // body to parse: it is dropped, so the request is served as the bodiless request it is.
    const headers = request.headers
    if (headers['content-type'] !== undefined && headers['transfer-encoding'] === undefined &&
      (headers['content-length'] === undefined || headers['content-length'] === '0')) delete headers['content-type']
    done()
  })
  installAccessLog(app, options.logStream ?? stdout)
  app.decorate('config', config)
  app.decorateRequest('caller', null)
  app.decorateRequest('idempotencyKey', null)
  installClientKeys(app, config.CLIENT_IPV6_PREFIX)
  installLoadShedding(app, config.MAX_EVENT_LOOP_DELAY_MS)

  // The database: opened, migrated when configured, closed with the app.
  const { db, dialect, read } = createDatabase({
    url: config.DATABASE_URL, poolSize: config.DB_POOL_SIZE, queueLimit: config.DB_QUEUE_LIMIT, timeoutMs: config.DB_TIMEOUT_MS
  })
  app.decorate('db', db)
  app.decorate('dialect', dialect)
  const outage = new OutageLog(app.log, () => ping(db))
  installProblems(app, outage, {
    forbiddenStatus: config.FORBIDDEN_STATUS === 403 ? 403 : 401,
    allowedMethods: allowedMethods(() => app.routePlans)
  })
  app.addHook('onClose', async () => {
    outage.close()
    await db.destroy()
  })
  if (config.MIGRATE_ON_START) {
    const applied = await migrateToLatest(db)
    if (applied.length) app.log.info({ applied, dialect }, 'database migrated')
  }
  app.decorate('cursors', new CursorCodec(await sharedSecret(db, 'cursor')))

  // Counters for the rate limit and the login guard: in memory, or shared through Redis.
  const warn = (details: object, message: string) => app.log.warn(details, message)
  const counters = await openCounters({ redisUrl: config.RATE_LIMIT_REDIS_URL, keyPrefix: config.REDIS_KEY_PREFIX, warn })
  app.addHook('onClose', counters.close)
  const guard = new LoginGuard({
    counter: counters.logins,
    maxPerPair: config.LOGIN_MAX_FAILURES,
    maxPerClient: config.LOGIN_MAX_FAILURES_PER_CLIENT,
    maxPerAccount: config.LOGIN_MAX_FAILURES_PER_ACCOUNT,
    windowMs: config.LOGIN_WINDOW_SECONDS * 1000,
    warn
  })

  // Mail: written to the outbox by the services, delivered in the background over SMTP (or to the log).
  const transport = config.SMTP_URL ? smtpTransport(config.SMTP_URL, config.MAIL_FROM) : logTransport(app.log)
  const deliverer = new MailDeliverer(db, transport, app.log, options.mail)
  app.decorate('mail', deliverer)
  app.addHook('onReady', async () => deliverer.start())
  app.addHook('preClose', async () => deliverer.stop())
  const throttle = new Throttle(counters.logins, warn)
  const addressMail = new AddressMail({
    verificationTtlSeconds: config.VERIFICATION_TTL_SECONDS,
    resetTtlSeconds: config.PASSWORD_RESET_TTL_SECONDS,
    linkTemplate: config.APP_LINK_TEMPLATE,
    resendSeconds: config.VERIFICATION_RESEND_SECONDS,
    maxPerClient: config.MAIL_MAX_PER_CLIENT,
    clientWindowSeconds: config.LOGIN_WINDOW_SECONDS
  }, throttle, () => deliverer.wake())

  app.decorate('services', {
    users: new UsersService(db, guard, addressMail, { signupOpen: config.SIGNUP_OPEN, claimSeconds: config.UNVERIFIED_CLAIM_SECONDS }),
    emails: new EmailsService(db, addressMail, {
      maxPerUser: config.MAX_EMAILS_PER_USER, requireEmail: config.REQUIRE_EMAIL, claimSeconds: config.UNVERIFIED_CLAIM_SECONDS
    }),
    verification: new VerificationService(db, addressMail, guard, {
      resendSeconds: config.VERIFICATION_RESEND_SECONDS,
      resetAnswerMs: RESET_ANSWER_MS
    }),
    auth: new AuthService(db, guard, {
      accessTtlSeconds: config.ACCESS_TOKEN_TTL_SECONDS,
      refreshTtlSeconds: config.REFRESH_TOKEN_TTL_SECONDS,
      sessionMaxAgeSeconds: config.SESSION_MAX_AGE_SECONDS,
      maxSessionsPerUser: config.MAX_SESSIONS_PER_USER
    }),
    sessions: new SessionsService(db)
  })

  await installCors(app, config.CORS_ORIGINS)
  // Every route registered from here on gets its steps, in the one order src/http/lifecycle.ts declares.
  const limiter = rateLimiter({ counter: counters.requests, max: config.RATE_LIMIT_MAX, windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS })
  const idempotencyKeys = new IdempotencyKeys(db)
  const purgeKeys = setInterval(() => idempotencyKeys.purge().catch((err: unknown) => app.log.warn({ err }, 'idempotency: purge failed')), 600_000)
  purgeKeys.unref()
  app.addHook('preClose', async () => clearInterval(purgeKeys))
  installLifecycle(app, {
    authenticate: authenticateStep({ findCaller: callerLookup(db, read), publicPrefixes: [DOCS_PREFIX], onRefusal: limiter.refusal }),
    'canonical-ids': canonicalIdsStep,
    multipart: multipartStep,
    authorize: authorizeStep,
    idempotency: idempotencyStep(idempotencyKeys),
    'rate-limit': limiter.step,
    'conditional-get': conditionalGetStep,
    'idempotency-record': idempotencyRecordStep(idempotencyKeys)
  })
  await installBodies(app)
  await installOpenApi(app)

  await app.register(healthRoutes)
  await app.register(authRoutes)
  await app.register(userRoutes)
  await app.register(emailRoutes)
  await app.register(sessionRoutes)
  await app.register(verificationRoutes)

  if (config.ADMIN_EMAIL && config.ADMIN_PASSWORD && (await app.services.users.ensureAdmin(config.ADMIN_EMAIL, config.ADMIN_PASSWORD))) {
    app.log.info({ email: config.ADMIN_EMAIL }, 'created the first admin')
  }
  return app
}

export type App = Awaited<ReturnType<typeof buildApp>>
