// The reference for the embedded-engine scenario: a bare node:http server with better-sqlite3 doing what Roster
// does for GET /users/{id} when a caller reads itself on the SQLite default (the token lookup joined with the user
// and its primary address, one prepared statement), with hand-written routing and JSON.stringify. No framework,
// no validation, no logging.
import { createHash } from 'node:crypto'
import http from 'node:http'
import Database from 'better-sqlite3'

const db = new Database(process.env.SQLITE_FILE, { readonly: true })
db.pragma('journal_mode = WAL')
const lookup = db.prepare('select users.id, users.name, emails.address as email, users.status, users.role, users.version, ' +
  'users.created_at, users.updated_at from tokens inner join users on users.id = tokens.user_id ' +
  'left join emails on emails.primary_user_id = users.id ' +
  'where tokens.token_hash = ? and tokens.expires_at > ? and users.status = ?')

function send(res, status, body) {
  const payload = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(payload) })
  res.end(payload)
}

http.createServer((req, res) => {
  try {
    const m = /^\/users\/([1-9][0-9]*)$/.exec(req.url ?? '')
    if (req.method !== 'GET' || !m) return send(res, 404, { code: 'NOT_FOUND' })
    const auth = req.headers.authorization ?? ''
    if (!auth.startsWith('Bearer ')) return send(res, 401, { code: 'UNAUTHENTICATED' })
    const hash = createHash('sha256').update(auth.slice(7)).digest('hex')
    const u = lookup.get(hash, Date.now(), 'ACTIVE')
    if (!u) return send(res, 401, { code: 'UNAUTHENTICATED' })
    if (u.id !== Number(m[1])) return send(res, 401, { code: 'FORBIDDEN' })
    res.setHeader('etag', `"v${u.version}"`)
    return send(res, 200, {
      id: u.id, href: `/users/${u.id}`, name: u.name, email: u.email, status: u.status, role: u.role,
      created_at: new Date(u.created_at).toISOString(), updated_at: new Date(u.updated_at).toISOString()
    })
  } catch {
    send(res, 500, { code: 'INTERNAL' })
  }
}).listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.('ready'))
