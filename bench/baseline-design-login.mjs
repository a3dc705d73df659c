// What the design alone costs a login: POST /auth/tokens on the stack Roster is built on, used as its documentation
// shows, and nothing else of Roster. Fastify with a TypeBox schema validating the body and serialising the answer,
// Fastify's logger at info with one access line per request through pino to standard output (as Fastify's own
// logger writes it), Kysely's own MysqlDialect over a mysql2 pool of POOL_SIZE (its query builder, compiled for each
// statement, and its transactions), the statements with values sent prepared as Roster's driver and the bare login
// send them (the dialect's connection runs `execute` for them where it would run `query`), the password checked by
// the same argon2id library. The durable work is the bare login's (bench/baseline-writes.mjs): find the user by the
// address, verify the password against its stored hash, then in one transaction lock the user, read its sessions,
// insert the session, the access and refresh tokens and the session.created event, commit. No login limits, no
// event placing, no metrics.
import { randomBytes } from 'node:crypto'
import { verify } from '@node-rs/argon2'
import { Type } from '@sinclair/typebox'
import Fastify, { LogController } from 'fastify'
import { Kysely, MysqlDialect } from 'kysely'
import { createPool } from 'mysql2'
import { ACCESS_TTL_MS, MAX_SESSIONS, newToken, REFRESH_TTL_MS, selfReadBody, SESSION_MAX_AGE_MS } from './baseline-server.mjs'

const pool = createPool({ uri: process.env.MYSQL_URL, connectionLimit: Number(process.env.POOL_SIZE ?? 20) })
/** Each pooled connection as the dialect sees it: a statement with values goes out prepared, `begin` and `commit` as text. */
const prepared = new WeakMap()
const preparing = (connection) => {
  let seen = prepared.get(connection)
  if (!seen) {
    seen = {
      query: (sql, values, done) => (values?.length ? connection.execute(sql, values, done) : connection.query(sql, values, done)),
      release: () => connection.release()
    }
    prepared.set(connection, seen)
  }
  return seen
}
const db = new Kysely({
  dialect: new MysqlDialect({
    pool: { getConnection: (done) => pool.getConnection((err, connection) => done(err, connection && preparing(connection))), end: (done) => pool.end(done) }
  })
})
const iso = (ms) => new Date(ms).toISOString()

const app = Fastify({
  logger: { level: 'info' },
  logController: new LogController({ disableRequestLogging: true })
})
app.addHook('onResponse', (request, reply, done) => {
  request.log.info({ method: request.method, url: request.url, statusCode: reply.statusCode, ms: reply.elapsedTime }, 'request')
  done()
})

const Login = Type.Object(
  { email: Type.String({ minLength: 1, maxLength: 254 }), password: Type.String({ minLength: 1, maxLength: 1024 }) }, { additionalProperties: false }
)
const Session = Type.Object({
  id: Type.Integer(), href: Type.String(), created_at: Type.String(), last_used_at: Type.String(), expires_at: Type.String(),
  client: Type.String(), current: Type.Boolean()
})
const User = Type.Object({
  id: Type.Integer(), href: Type.String(), name: Type.String(), email: Type.Union([Type.String(), Type.Null()]),
  status: Type.String(), role: Type.String(), created_at: Type.String(), updated_at: Type.String()
})
const Issued = Type.Object({
  token: Type.String(), token_type: Type.String(), expires_in: Type.Integer(), expires_at: Type.String(), refresh_token: Type.String(),
  refresh_expires_at: Type.String(), session: Session, user: User
})

app.post('/auth/tokens', { schema: { body: Login, response: { 201: Issued } } }, async (request, reply) => {
  const { email, password } = request.body
  const credentials = await db.selectFrom('emails').innerJoin('users', 'users.id', 'emails.user_id')
    .select(['users.id', 'users.password_hash', 'users.status'])
    .where('emails.address_norm', '=', email.normalize('NFC').toLowerCase())
    .where((eb) => eb.or([eb('emails.primary_user_id', 'is not', null), eb('emails.verified_at', 'is not', null)]))
    .executeTakeFirst()
  if (!credentials || !(await verify(credentials.password_hash, password).catch(() => false)) || credentials.status !== 'ACTIVE') {
    return reply.code(401).send({ code: 'UNAUTHENTICATED' })
  }
  const agent = request.headers['user-agent'] ?? ''
  const issued = await db.transaction().execute(async (trx) => {
    const now = Date.now()
    const user = await trx.selectFrom('users').leftJoin('emails', 'emails.primary_user_id', 'users.id')
      .select(['users.id', 'users.name', 'emails.address as email', 'users.status', 'users.role', 'users.version', 'users.created_at',
        'users.updated_at', 'users.password_hash'])
      .where('users.id', '=', credentials.id).forUpdate().executeTakeFirst()
    if (!user || user.password_hash !== credentials.password_hash) return undefined
    const sessions = await trx.selectFrom('sessions').select(['id', 'expires_at', 'ends_at']).where('user_id', '=', user.id).orderBy('id').execute()
    const stale = sessions.filter((s) => s.expires_at <= now || s.ends_at <= now).map((s) => s.id)
    const live = sessions.filter((s) => s.expires_at > now && s.ends_at > now)
    stale.push(...live.slice(0, Math.max(0, live.length - (MAX_SESSIONS - 1))).map((s) => s.id))
    if (stale.length) await trx.deleteFrom('sessions').where('id', 'in', stale).execute()
    const endsAt = now + SESSION_MAX_AGE_MS
    const session = { user_id: user.id, created_at: now, last_used_at: now, client: agent.slice(0, 200), expires_at: Math.min(now + REFRESH_TTL_MS, endsAt) }
    const inserted = await trx.insertInto('sessions').values({ ...session, ends_at: endsAt }).executeTakeFirstOrThrow()
    const id = Number(inserted.insertId)
    const access = newToken()
    const next = newToken()
    const accessExpires = Math.min(now + ACCESS_TTL_MS, session.expires_at)
    await trx.insertInto('tokens').values({ token_hash: access.hash, user_id: user.id, session_id: id, created_at: now, expires_at: accessExpires }).execute()
    await trx.insertInto('refresh_tokens').values({ token_hash: next.hash, session_id: id, created_at: now, expires_at: session.expires_at, used_at: null }).execute()
    const presented = {
      id, href: `/users/${user.id}/sessions/${id}`, created_at: iso(now), last_used_at: iso(now), expires_at: iso(session.expires_at), client: session.client
    }
    await trx.insertInto('events').values({
      public_id: `evt_${randomBytes(13).toString('hex')}`, type: 'session.created', user_id: user.id, actor_type: 'user', actor_id: user.id,
      request_id: null, data: JSON.stringify(presented), previous: null, occurred_at: now, position: null
    }).execute()
    return {
      token: access.token, token_type: 'Bearer', expires_in: Math.round((accessExpires - now) / 1000), expires_at: iso(accessExpires),
      refresh_token: next.token, refresh_expires_at: iso(session.expires_at), session: { ...presented, current: true }, user: selfReadBody(user)
    }
  })
  return issued ? reply.code(201).send(issued) : reply.code(401).send({ code: 'UNAUTHENTICATED' })
})
app.get('/', async () => ({ ok: true }))

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.send?.('ready')
