// The framework alone, for `npm run bench:profile`: a Fastify server with one route doing what the bare SQLite
// baseline does for GET /users/{id} (the same lookup, prepared once), with no schema, no hooks and no logger.
import Database from 'better-sqlite3'
import Fastify from 'fastify'
import { bearerHash, SELF_READ_SQL, selfReadBody } from './baseline-server.mjs'

const db = new Database(process.env.SQLITE_FILE, { readonly: true })
const lookup = db.prepare(SELF_READ_SQL)
const app = Fastify({ logger: false })

app.get('/users/:id', (request, reply) => {
  const hash = bearerHash(request.headers.authorization)
  const u = hash ? lookup.get(hash, Date.now(), 'ACTIVE') : undefined
  if (!u) return reply.code(401).send({ code: 'UNAUTHENTICATED' })
  if (u.id !== Number(request.params.id)) return reply.code(401).send({ code: 'FORBIDDEN' })
  reply.header('etag', `"v${u.version}"`)
  return reply.send(selfReadBody(u))
})

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.send?.('ready')
