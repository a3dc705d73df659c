// What the design alone costs, for `npm run bench:profile`: a Fastify server with only what Roster's design requires
// of GET /users/{id}: TypeBox schemas validating the path and serialising the answer, the caller looked up in an
// onRequest hook, the route's authorization in a preHandler hook, and (unless DESIGN_LOG=off) Fastify's logger at
// info with one access line per request through pino. None of Roster's other steps, routes or plugins.
import Database from 'better-sqlite3'
import Fastify, { LogController } from 'fastify'
import { Type } from '@sinclair/typebox'
import { bearerHash, SELF_READ_SQL, selfReadBody } from './baseline-server.mjs'

const logging = process.env.DESIGN_LOG !== 'off'
const db = new Database(process.env.SQLITE_FILE, { readonly: true })
const lookup = db.prepare(SELF_READ_SQL)
const app = Fastify({
  logger: logging ? { level: 'info', stream: { write() {} } } : false,
  logController: new LogController({ disableRequestLogging: true })
})
app.decorateRequest('caller', null)

const Params = Type.Object({ id: Type.Integer({ minimum: 1 }) }, { additionalProperties: false })
const User = Type.Object({
  id: Type.Integer(), href: Type.String(), name: Type.String(), email: Type.Union([Type.String(), Type.Null()]),
  status: Type.String(), role: Type.String(), created_at: Type.String(), updated_at: Type.String()
})

app.addHook('onRequest', (request, reply, done) => {
  const hash = bearerHash(request.headers.authorization)
  request.caller = hash ? lookup.get(hash, Date.now(), 'ACTIVE') : undefined
  if (!request.caller) return reply.code(401).send({ code: 'UNAUTHENTICATED' })
  done()
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
