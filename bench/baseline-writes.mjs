// The reference for the write scenarios: a bare node:http server with mysql2 (prepared statements, as Roster's driver
// sends them) doing Roster's durable work on Roster's own tables, and nothing else. Its tokens and Roster's are one.
// - A refresh: lock the refresh token with its session, spend it, renew the session, insert both new tokens, commit (7).
// - PUT /users/{id}/name: the caller by its token, lock the user, write the name and the user.updated event, commit (6).
// - A login: the user by its address, its argon2id hash verified (the same library), lock the user, read its sessions,
//   insert the session, both tokens and the session.created event, commit (9 round trips).
import { createHash, randomBytes } from 'node:crypto'
import http from 'node:http'
import { verify } from '@node-rs/argon2'
import { createPool } from 'mysql2/promise'
import { ACCESS_TTL_MS, bearerHash, MAX_SESSIONS, newToken, REFRESH_TTL_MS, SELF_READ_SQL, selfReadBody, send, SESSION_MAX_AGE_MS } from './baseline-server.mjs'

const pool = createPool({ uri: process.env.MYSQL_URL, connectionLimit: Number(process.env.POOL_SIZE ?? 10) })
const readBody = async (req) => JSON.parse(Buffer.concat(await req.toArray()).toString('utf8'))

/** Runs `work` in a transaction on one pooled connection. */
async function transaction(work) {
  const conn = await pool.getConnection()
  try {
    await conn.query('begin')
    const result = await work(conn)
    await conn.query(result === undefined ? 'rollback' : 'commit')
    return result
  } catch (err) {
    await conn.query('rollback').catch(() => {})
    throw err
  } finally {
    conn.release()
  }
}

/** A session's new access and refresh tokens: two inserts. */
async function issueTokens(conn, userId, sessionId, now, expiresAt) {
  const [access, next, accessExpires] = [newToken(), newToken(), Math.min(now + ACCESS_TTL_MS, expiresAt)]
  await conn.execute('insert into tokens (token_hash, user_id, session_id, created_at, expires_at) values (?, ?, ?, ?, ?)', [access.hash, userId, sessionId, now, accessExpires])
  await conn.execute('insert into refresh_tokens (token_hash, session_id, created_at, expires_at, used_at) values (?, ?, ?, ?, null)', [next.hash, sessionId, now, expiresAt])
  return { access, next, accessExpires }
}

async function refresh(body) {
  if (body.grant_type !== 'refresh_token' || typeof body.refresh_token !== 'string') return undefined
  const hash = createHash('sha256').update(body.refresh_token).digest('hex')
  return transaction(async (conn) => {
    const now = Date.now()
    const [rows] = await conn.execute(
      'select refresh_tokens.id, refresh_tokens.used_at, refresh_tokens.expires_at, sessions.id as session_id, sessions.user_id, ' +
      'sessions.ends_at from refresh_tokens inner join sessions on sessions.id = refresh_tokens.session_id ' +
      'where refresh_tokens.token_hash = ? for update', [hash])
    const row = rows[0]
    if (!row || row.used_at !== null || row.expires_at <= now) return undefined
    await conn.execute('update refresh_tokens set used_at = ? where id = ? and used_at is null', [now, row.id])
    const expiresAt = Math.min(now + REFRESH_TTL_MS, row.ends_at)
    await conn.execute('update sessions set last_used_at = ?, expires_at = ? where id = ?', [now, expiresAt, row.session_id])
    const { access, next, accessExpires } = await issueTokens(conn, row.user_id, row.session_id, now, expiresAt)
    return {
      token: access.token, token_type: 'Bearer', expires_in: Math.round((accessExpires - now) / 1000), refresh_token: next.token,
      refresh_expires_in: Math.round((expiresAt - now) / 1000), session: { id: row.session_id }
    }
  })
}

const EVENT_SQL = 'insert into events (public_id, type, user_id, actor_type, actor_id, request_id, data, previous, occurred_at, position) values (?, ?, ?, ?, ?, ?, ?, ?, ?, null)'
const USER_COLUMNS = 'users.id, users.name, emails.address as email, users.status, users.role, users.version, users.created_at, users.updated_at'

async function login(body, agent = '') {
  if (typeof body.email !== 'string' || typeof body.password !== 'string') return undefined
  const [found] = await pool.execute(
    'select users.id, users.password_hash, users.status from emails inner join users on users.id = emails.user_id ' +
    'where emails.address_norm = ? and (emails.primary_user_id is not null or emails.verified_at is not null)', [body.email.normalize('NFC').toLowerCase()])
  const credentials = found[0]
  if (!credentials || !(await verify(credentials.password_hash, body.password).catch(() => false)) || credentials.status !== 'ACTIVE') return undefined
  return transaction(async (conn) => {
    const now = Date.now()
    const [locked] = await conn.execute(
      `select ${USER_COLUMNS}, users.password_hash from users left join emails on emails.primary_user_id = users.id where users.id = ? for update`, [credentials.id])
    const user = locked[0]
    if (!user || user.password_hash !== credentials.password_hash) return undefined
    const [sessions] = await conn.execute('select id, expires_at, ends_at from sessions where user_id = ? order by id', [user.id])
    const stale = sessions.filter((s) => s.expires_at <= now || s.ends_at <= now).map((s) => s.id)
    const live = sessions.filter((s) => s.expires_at > now && s.ends_at > now)
    stale.push(...live.slice(0, Math.max(0, live.length - (MAX_SESSIONS - 1))).map((s) => s.id))
    if (stale.length) await conn.query('delete from sessions where id in (?)', [stale])
    const endsAt = now + SESSION_MAX_AGE_MS
    const session = { user_id: user.id, created_at: now, last_used_at: now, client: agent.slice(0, 200), expires_at: Math.min(now + REFRESH_TTL_MS, endsAt) }
    const [inserted] = await conn.execute('insert into sessions (user_id, created_at, last_used_at, client, expires_at, ends_at) values (?, ?, ?, ?, ?, ?)',
      [session.user_id, now, now, session.client, session.expires_at, endsAt])
    session.id = inserted.insertId
    const { access, next, accessExpires } = await issueTokens(conn, user.id, session.id, now, session.expires_at)
    const presented = sessionBody(session)
    await conn.execute(EVENT_SQL, [`evt_${randomBytes(13).toString('hex')}`, 'session.created', user.id, 'user', user.id, null, JSON.stringify(presented), null, now])
    return {
      token: access.token, token_type: 'Bearer', expires_in: Math.round((accessExpires - now) / 1000), expires_at: new Date(accessExpires).toISOString(),
      refresh_token: next.token, refresh_expires_at: new Date(session.expires_at).toISOString(),
      session: { ...presented, current: true }, user: selfReadBody(user)
    }
  })
}

const sessionBody = (s) => ({
  id: s.id, href: `/users/${s.user_id}/sessions/${s.id}`, created_at: new Date(s.created_at).toISOString(),
  last_used_at: new Date(s.last_used_at).toISOString(), expires_at: new Date(s.expires_at).toISOString(), client: s.client
})

async function rename(id, hash, body) {
  if (typeof body.name !== 'string') return undefined
  const [found] = await pool.execute(SELF_READ_SQL, [hash, Date.now(), 'ACTIVE'])
  if (!found[0] || found[0].id !== id) return undefined
  return transaction(async (conn) => {
    const now = Date.now()
    const [rows] = await conn.execute(`select ${USER_COLUMNS} from users left join emails on emails.primary_user_id = users.id where users.id = ? for update`, [id])
    const before = rows[0]
    if (!before) return undefined
    await conn.execute('update users set name = ?, name_search = ?, version = version + 1, updated_at = ? where id = ?',
      [body.name, body.name.normalize('NFC').toLowerCase(), now, id])
    const after = { ...before, name: body.name, version: before.version + 1, updated_at: now }
    await conn.execute(EVENT_SQL, [`evt_${randomBytes(13).toString('hex')}`, 'user.updated', id, 'user', id, null, JSON.stringify(selfReadBody(after)), JSON.stringify({ name: before.name }), now])
    return after
  })
}

http.createServer((req, res) => {
  const failed = (err) => send(res, 500, { code: 'INTERNAL', detail: String(err?.message ?? err) })
  const refused = () => send(res, 401, { code: 'UNAUTHENTICATED' })
  try {
    if (req.method === 'GET' && req.url === '/') return send(res, 200, { ok: true })
    if (req.method === 'POST' && req.url === '/auth/tokens') {
      return readBody(req).then((body) => (body.grant_type === undefined ? login(body, req.headers['user-agent']) : refresh(body)))
        .then((issued) => (issued ? send(res, 201, issued) : refused()), failed)
    }
    const m = /^\/users\/([1-9][0-9]*)\/name$/.exec(req.url ?? '')
    const hash = bearerHash(req.headers.authorization)
    if (req.method === 'PUT' && m && hash) {
      return readBody(req).then((body) => rename(Number(m[1]), hash, body))
        .then((u) => (u ? send(res, 200, selfReadBody(u), { etag: `"v${u.version}"` }) : refused()), failed)
    }
    return send(res, 404, { code: 'NOT_FOUND' })
  } catch (err) {
    failed(err)
  }
}).listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'))
