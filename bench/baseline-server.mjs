// What the baselines share: the HTTP side of GET /users/{id} for a caller reading itself, with hand-written
// routing and JSON.stringify (no framework, no validation, no logging; each baseline brings its own lookup), and
// for the write baselines Roster's token shape and lifetimes.
import { createHash, randomBytes } from 'node:crypto'
import http from 'node:http'

/** The one query of a self-read: the token joined with its user and the user's primary address. */
export const SELF_READ_SQL = 'select users.id, users.name, emails.address as email, users.status, users.role, users.version, users.created_at, ' +
  'users.updated_at from tokens inner join users on users.id = tokens.user_id left join emails on emails.primary_user_id = users.id ' +
  'where tokens.token_hash = ? and tokens.expires_at > ? and users.status = ?'

/** Roster's lifetimes and session limit as the bench runs it: access tokens live a day there (bench/run.ts), the rest are defaults. */
export const [ACCESS_TTL_MS, REFRESH_TTL_MS, SESSION_MAX_AGE_MS, MAX_SESSIONS] = [86_400_000, 30 * 86_400_000, 90 * 86_400_000, 100]

/** A token as Roster makes them (256 random bits, base64url) and the SHA-256 (hex) it is stored under. */
export const newToken = (token = randomBytes(32).toString('base64url')) => ({ token, hash: createHash('sha256').update(token).digest('hex') })

export function send(res, status, body, headers = {}) {
  const payload = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(payload), ...headers })
  res.end(payload)
}

function answer(res, id, u) {
  if (!u) return send(res, 401, { code: 'UNAUTHENTICATED' })
  if (u.id !== id) return send(res, 401, { code: 'FORBIDDEN' })
  res.setHeader('etag', `"v${u.version}"`)
  return send(res, 200, selfReadBody(u))
}

/** The SHA-256 (hex) under which the token of an `Authorization: Bearer …` header is stored, or undefined. */
export const bearerHash = (header = '') => (header.startsWith('Bearer ') ? createHash('sha256').update(header.slice(7)).digest('hex') : undefined)

/** The answer's body: the caller's row as Roster presents a user. */
export const selfReadBody = (u) => ({
  id: u.id, href: `/users/${u.id}`, name: u.name, email: u.email, status: u.status, role: u.role,
  created_at: new Date(u.created_at).toISOString(), updated_at: new Date(u.updated_at).toISOString()
})

/** Serves self-reads on PORT; `lookup(hash)` gives the caller's row, at once (a synchronous driver) or as a promise. */
export function serveSelfRead(lookup) {
  http.createServer((req, res) => {
    const failed = () => send(res, 500, { code: 'INTERNAL' })
    try {
      const m = /^\/users\/([1-9][0-9]*)$/.exec(req.url ?? '')
      if (req.method !== 'GET' || !m) return send(res, 404, { code: 'NOT_FOUND' })
      const hash = bearerHash(req.headers.authorization)
      if (!hash) return send(res, 401, { code: 'UNAUTHENTICATED' })
      const found = lookup(hash)
      const id = Number(m[1])
      if (found instanceof Promise) found.then((u) => answer(res, id, u), failed)
      else answer(res, id, found)
    } catch {
      failed()
    }
  }).listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'))
}
