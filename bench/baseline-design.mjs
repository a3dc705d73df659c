// What the design alone costs: a Fastify server with only what Roster's design requires of GET /users/{id}: TypeBox
// schemas validating the path and serialising the answer, the caller looked up in an onRequest hook, the route's
// authorization in a preHandler hook, and (unless DESIGN_LOG=off) Fastify's logger at info with one access line per
// request through pino to standard output, as Fastify's own logger writes it (pino's synchronous destination, a
// write a line), where Roster writes its lines too. None of Roster's other steps, routes or plugins. On SQLITE_FILE
// for `npm run bench:profile`; on MYSQL_URL (a mysql2 pool of POOL_SIZE, the lookup a prepared statement, as
// Roster's driver sends it) for `npm run bench`'s scenario 1.
import Fastify, { LogController } from 'fastify'
import { Type } from '@sinclair/typebox'
import { bearerHash, SELF_READ_SQL, selfReadBody } from './baseline-server.mjs'

const logging = process.env.DESIGN_LOG !== 'off'
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
  logger: logging ? { level: 'info' } : false,
  logController: new LogController({ disableRequestLogging: true })
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
  const admit = (caller) => {
    request.caller = caller
    if (!caller) return reply.code(401).send({ code: 'UNAUTHENTICATED' })
    done()
  }
  const found = hash ? lookup(hash) : undefined
  if (found instanceof Promise) found.then(admit, done)
  else admit(found)
})
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
  reply.header('etag', `"v${request.caller.version}"`)
  reply.send(selfReadBody(request.caller))
})

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.send?.('ready')
