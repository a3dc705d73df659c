// The reference for the embedded-engine scenario: a bare node:http server with better-sqlite3 doing what Roster
// does for GET /users/{id} when a caller reads itself on the SQLite default (the token lookup joined with the user
// and its primary address, one statement prepared once), with the HTTP side of bench/baseline-server.mjs.
import Database from 'better-sqlite3'
import { SELF_READ_SQL, serveSelfRead } from './baseline-server.mjs'

const db = new Database(process.env.SQLITE_FILE, { readonly: true })
const lookup = db.prepare(SELF_READ_SQL)

serveSelfRead((hash) => lookup.get(hash, Date.now(), 'ACTIVE'))
