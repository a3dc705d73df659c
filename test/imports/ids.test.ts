import t from 'tap'
import { Kysely, MysqlDialect, type MysqlPool, type MysqlPoolConnection } from 'kysely'
import { createPool, type PoolConnection } from 'mysql2'
import type { Database } from '../../db/types.js'
import { insertUserRows } from '../../src/imports/repository.js'
import { ENGINE, migratedDatabase } from '../helpers.js'

/**
 * A batch of imported users' ids on a MySQL server without INSERT … RETURNING (MySQL itself): MariaDB is made to refuse
 * the clause as MySQL does, and the ids must still pair with the rows in order.
 */
t.test('new users\' ids where RETURNING is refused', { skip: ENGINE !== 'mysql' && 'a MySQL path' }, async (t) => {
  const { url, drop } = await migratedDatabase()
  t.teardown(drop)
  const pool = createPool({ uri: url, connectionLimit: 2 })
  let refused = 0
  const asMysql = (connection: PoolConnection): MysqlPoolConnection => ({
    query: ((sql: string, parameters: unknown[], callback?: (err: unknown, result?: unknown) => void) => {
      if (callback && / returning id$/.test(sql)) {
        refused++
        return callback(Object.assign(new Error('You have an error in your SQL syntax'), { errno: 1064 }))
      }
      return callback ? connection.query(sql, parameters, callback) : connection.query(sql, parameters)
    }) as MysqlPoolConnection['query'],
    release: () => connection.release()
  })
  const mysqlPool: MysqlPool = {
    getConnection: (callback) => pool.getConnection((err, connection) => callback(err, err ? (undefined as never) : asMysql(connection))),
    end: (callback) => pool.end(callback)
  }
  const db = new Kysely<Database>({ dialect: new MysqlDialect({ pool: mysqlPool }) })
  t.teardown(() => db.destroy())

  const now = Date.now()
  const row = (name: string) => ({
    name, name_search: name.toLowerCase(), password_hash: '', password_set_at: null, external_id: `ext-${name}`, status: 'ACTIVE' as const,
    ban_reason: null, banned_until: null, banned_at: null, banned_by_type: null, banned_by_id: null, role: 'user' as const,
    deletion_scheduled_at: null, version: 1, created_at: now, updated_at: now
  })
  for (const batch of [['a1', 'a2', 'a3'], ['b1', 'b2']]) {
    const ids = await db.transaction().execute((trx) => insertUserRows(trx, batch.map(row)))
    const stored = await db.selectFrom('users').select(['id', 'name']).where('id', 'in', ids).orderBy('id').execute()
    t.same(stored.map((r) => r.name), batch, `the ids of ${batch.join(', ')} pair with their rows, in order`)
  }
  t.equal(refused, 1, 'RETURNING is tried once, then the server is known not to take it')
})
