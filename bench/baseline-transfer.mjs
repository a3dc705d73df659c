// The references for the import and export scenarios, on the database DATABASE_URL names (MySQL or SQLite):
// - `import FILE`: the users of a roster NDJSON file written as an import writes them (users, addresses, user.created
//   events), in multi-row inserts of BATCH users a transaction, into a fresh database migrated as Roster migrates it.
// - otherwise, a bare node:http server streaming every user with its addresses as NDJSON from one SELECT, pulled as
//   the socket drains (mysql2's query().stream(), better-sqlite3's iterate()).
import { randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import http from 'node:http'
import { createInterface } from 'node:readline'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import Database from 'better-sqlite3'
import { createConnection } from 'mysql2'
import { createDatabase, sqlitePath } from '../dist/src/database/index.js'

const url = process.env.DATABASE_URL
const BATCH = 500
const iso = (ms) => new Date(ms).toISOString()

async function importFile(file) {
  const { db, migrate } = createDatabase({ url })
  await migrate()
  const [started, batch] = [Date.now(), []]
  let next = 1
  const flush = () => db.transaction().execute(async (trx) => {
    const [now, lines] = [Date.now(), batch.splice(0)]
    const users = lines.map((l) => ({
      id: next++, name: l.name, name_search: l.name.toLowerCase(), password_hash: l.password_hash, password_set_at: null, external_id: null,
      status: 'ACTIVE', role: 'user', version: 1, created_at: now, updated_at: now
    }))
    const email = (i) => lines[i].emails[0].address
    if (!users.length) return
    await trx.insertInto('users').values(users).execute()
    await trx.insertInto('emails').values(users.map((u, i) => ({
      user_id: u.id, address: email(i), address_norm: email(i).toLowerCase(), primary_user_id: u.id, version: 1, created_at: now, updated_at: now,
      verified_at: now, claimed_at: now
    }))).execute()
    await trx.insertInto('events').values(users.map((u, i) => ({
      public_id: `evt_${randomBytes(13).toString('hex')}`, type: 'user.created', user_id: u.id, actor_type: 'admin', actor_id: 1, request_id: 'bench', previous: null,
      occurred_at: now, position: null, data: JSON.stringify({ id: u.id, href: `/users/${u.id}`, name: u.name, email: email(i), status: u.status, role: u.role, created_at: iso(now), updated_at: iso(now) })
    }))).execute()
  })
  for await (const text of createInterface({ input: createReadStream(file) })) {
    if (batch.push(JSON.parse(text)) === BATCH) await flush()
  }
  await flush()
  console.log(JSON.stringify({ users: next - 1, ms: Date.now() - started }))
  await db.destroy()
}

// Ordered by the user alone: the (user_id, id) index gives each user's addresses in order, and MariaDB streams without a filesort.
const SELECT = 'select users.id, users.external_id, users.name, users.status, users.role, users.created_at, emails.address, emails.verified_at, ' +
  'emails.primary_user_id from users left join emails on emails.user_id = users.id order by users.id'

/** The rows, one user's in a row, as the export's lines, about 64 KB a chunk. */
async function * lines(rows) {
  let [chunk, user, id] = ['']
  const line = () => JSON.stringify({ ...user, created_at: iso(user.created_at), metadata: { public: {}, private: {}, unsafe: {} } }) + '\n'
  for await (const r of rows) {
    if (id !== r.id) {
      if (user) chunk += line()
      if (chunk.length > 65_536) { yield chunk; chunk = '' }
      id = r.id
      user = { external_id: r.external_id, name: r.name, emails: [], status: r.status, role: r.role, created_at: Number(r.created_at) }
    }
    if (r.address !== null) user.emails.push({ address: r.address, verified: r.verified_at !== null, primary: r.primary_user_id !== null })
  }
  yield user ? chunk + line() : chunk
}

if (process.argv[2] === 'import') {
  await importFile(process.argv[3])
} else {
  const mysql = url.startsWith('mysql:') && createConnection({ uri: url })
  const sqlite = !mysql && new Database(sqlitePath(url), { readonly: true }).prepare(SELECT)
  http.createServer((req, res) => {
    if (req.url !== '/export') return res.end('ok')
    res.writeHead(200, { 'content-type': 'application/x-ndjson' })
    pipeline(Readable.from(lines(mysql ? mysql.query(SELECT).stream() : sqlite.iterate())), res).catch((err) => res.destroy(err))
  }).listen(Number(process.env.PORT), '127.0.0.1')
}
