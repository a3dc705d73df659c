// What the design alone costs: a Fastify server with only what Roster's design requires of GET /users/{id}: TypeBox
// schemas validating the path and serialising the answer, the caller looked up in an onRequest hook, the route's
// authorization in a preHandler hook, and (unless DESIGN_LOG=off) Fastify's logger at info with one access line per
// request through pino to standard output, as Fastify's own logger writes it (pino's synchronous destination, a
// write a line), where Roster writes its lines too. None of Roster's other steps, routes or plugins. On SQLITE_FILE
// for `npm run bench:profile` and `npm run bench`'s embedded scenario; on MYSQL_URL (a mysql2 pool of POOL_SIZE, the lookup a prepared statement, as
// Roster's driver sends it) for `npm run bench`'s scenario 1.
//
// DESIGN_CONTRACT=on adds the rest of what the contract, and Roster's security and reliability rules, ask of every
// self-read's answer, each part in the fewest steps a server on this stack can take for it (contractOptions, below):
// the contract's minimum, the floor they put under Roster on Fastify. DESIGN_WITHOUT (a comma-separated list of
// logger, nosniff, ids, limit, metrics, timeouts, shed; logger only with DESIGN_LOG=off) leaves parts out, so that
// `npm run bench:profile` can weigh each one.
import { randomUUID } from 'node:crypto'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import Fastify, { LogController } from 'fastify'
import { Type } from '@sinclair/typebox'
import { bearerHash, SELF_READ_SQL, selfReadBody } from './baseline-server.mjs'

const logging = process.env.DESIGN_LOG !== 'off'
const contract = process.env.DESIGN_CONTRACT === 'on'
const PARTS = ['logger', 'nosniff', 'ids', 'limit', 'metrics', 'timeouts', 'shed']
const without = new Set((process.env.DESIGN_WITHOUT ?? '').split(',').map((part) => part.trim()).filter(Boolean))
for (const part of without) if (!PARTS.includes(part)) throw new Error(`DESIGN_WITHOUT: unknown part ${part}; known: ${PARTS.join(', ')}`)
/** Which of the contract's parts are served, decided once: the requests read a flag each. */
const on = Object.fromEntries(PARTS.map((part) => [part, contract && !without.has(part)]))

/**
 * The further outputs of every answer, each the least a server on this stack can do for it. The contract's: the
 * request's id (the client's when it fits, else a random UUID, as Roster makes them) on the answer and on any log
 * line, through a logger at `warn` (Fastify makes it a child a request) [ids, logger]; the rate limit's two headers
 * from a count a window per caller [limit]; each answer's duration observed into a histogram by method, route and
 * status [metrics]; a 304 for the current tag. Roster's security and reliability rules: `nosniff` [nosniff], a 503
 * while the event loop lags [shed], the connection timeouts against slow clients [timeouts]. No plugins, no route
 * rules, no problem bodies, no canonical-id check, no method override: Roster does those too, so the floor is if
 * anything low. The server's options here, the parts' steps below.
 */
function contractOptions() {
  return {
    ...(on.timeouts ? { requestTimeout: 15_000, connectionTimeout: 10_000, keepAliveTimeout: 10_000 } : {}),
    genReqId: on.ids ? (req) => {
      const sent = req.headers['x-request-id']
      return typeof sent === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(sent) ? sent : randomUUID()
    } : undefined
  }
}

const MAX = 100_000_000
const WINDOW_MS = 60_000
const POLICY = `"default";q=${MAX};w=${WINDOW_MS / 1000}`
const windows = new Map()
function counted(key, reply) {
  const now = Date.now()
  let w = windows.get(key)
  if (!w || w.expires <= now) windows.set(key, (w = { count: 0, expires: now + WINDOW_MS }))
  w.count++
  reply.header('ratelimit-policy', POLICY)
  reply.header('ratelimit', `"default";r=${Math.max(0, MAX - w.count)};t=${Math.max(1, Math.ceil((w.expires - now) / 1000))}`)
  return w.count <= MAX
}

const BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const series = new Map()
function observe(method, status, seconds, done) {
  const key = `${method} ${status} /users/:id`
  let s = series.get(key)
  if (!s) series.set(key, (s = { buckets: new Array(BOUNDS.length + 1).fill(0), sum: 0, count: 0 }))
  let b = 0
  while (b < BOUNDS.length && seconds > BOUNDS[b]) b++
  s.buckets[b]++
  s.sum += seconds
  s.count++
  done()
}

let lagging = false
if (on.shed) {
  const delay = monitorEventLoopDelay({ resolution: 10 })
  delay.enable()
  setInterval(() => { lagging = delay.count === 0 || delay.mean / 1e6 - 10 > 1000; delay.reset() }, 250).unref()
}

const lookup = process.env.MYSQL_URL ? await mysqlLookup(process.env.MYSQL_URL) : await sqliteLookup(process.env.SQLITE_FILE)

async function sqliteLookup(file) {
  const { default: Database } = await import('better-sqlite3')
  const statement = new Database(file, { readonly: true }).prepare(SELF_READ_SQL)
  return (hash) => statement.get(hash, Date.now(), 'ACTIVE')
}

async function mysqlLookup(uri) {
  const { createPool } = await import('mysql2/promise')
  const pool = createPool({ uri, connectionLimit: Number(process.env.POOL_SIZE ?? 10) })
  return async (hash) => (await pool.execute(SELF_READ_SQL, [hash, Date.now(), 'ACTIVE']))[0][0]
}
const app = Fastify({
  logger: logging ? { level: 'info' } : on.logger ? { level: 'warn' } : false,
  logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
  ...(contract ? contractOptions() : {})
})
app.decorateRequest('caller', null)

const Params = Type.Object({ id: Type.Integer({ minimum: 1 }) }, { additionalProperties: false })
const User = Type.Object({
  id: Type.Integer(), href: Type.String(), name: Type.String(), email: Type.Union([Type.String(), Type.Null()]),
  status: Type.String(), role: Type.String(), created_at: Type.String(), updated_at: Type.String()
})

// A callback hook: the SQLite lookup answers at once, MySQL's with a promise.
app.addHook('onRequest', (request, reply, done) => {
  const hash = bearerHash(request.headers.authorization)
  if (contract) {
    if (on.nosniff) reply.header('x-content-type-options', 'nosniff')
    if (on.ids) reply.header('x-request-id', request.id)
    if (lagging) return reply.code(503).header('retry-after', '2').send({ code: 'UNAVAILABLE' })
  }
  const admit = (caller) => {
    request.caller = caller
    if (!caller) return reply.code(401).send({ code: 'UNAUTHENTICATED' })
    if (on.limit && !counted(`u${caller.id}`, reply)) return reply.code(429).header('retry-after', '60').send({ code: 'RATE_LIMITED' })
    done()
  }
  const found = hash ? lookup(hash) : undefined
  if (found instanceof Promise) found.then(admit, done)
  else admit(found)
})
if (on.metrics) app.addHook('onResponse', (request, reply, done) => observe(request.method, reply.statusCode, reply.elapsedTime / 1000, done))
if (logging) {
  app.addHook('onResponse', (request, reply, done) => {
    request.log.info({ method: request.method, url: request.url, statusCode: reply.statusCode, ms: reply.elapsedTime }, 'request')
    done()
  })
}
app.get('/users/:id', {
  schema: { params: Params, response: { 200: User } },
  preHandler: (request, reply, done) => (request.caller.id === request.params.id ? done() : reply.code(401).send({ code: 'FORBIDDEN' }))
}, (request, reply) => {
  const etag = `"v${request.caller.version}"`
  reply.header('etag', etag)
  if (contract && request.headers['if-none-match'] === etag) return reply.code(304).send()
  reply.send(selfReadBody(request.caller))
})

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.send?.('ready')

