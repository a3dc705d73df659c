// The reference for scenario 1: a bare node:http server with mysql2 doing what Roster does for GET /users/{id}
// when a caller reads itself (token lookup joined with the user and its primary address, one query), with
// hand-written routing and JSON.stringify (bench/baseline-server.mjs). STATEMENTS=prepared sends the lookup as a
// server-side prepared statement (`execute`) instead of a text query, as Roster's driver does.
import { createPool } from 'mysql2/promise'
import { SELF_READ_SQL, serveSelfRead } from './baseline-server.mjs'

const pool = createPool({ uri: process.env.MYSQL_URL, connectionLimit: Number(process.env.POOL_SIZE ?? 10) })
const prepared = process.env.STATEMENTS === 'prepared'

serveSelfRead(async (hash) => {
  const values = [hash, Date.now(), 'ACTIVE']
  const [rows] = prepared ? await pool.execute(SELF_READ_SQL, values) : await pool.query(SELF_READ_SQL, values)
  return rows[0]
})
