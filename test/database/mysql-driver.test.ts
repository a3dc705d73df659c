import { sql } from 'kysely'
import t from 'tap'
import { MAX_PREPARED_PARAMETERS } from '../../src/database/mysql-driver.js'
import { build, ENGINE } from '../helpers.js'

// The MySQL driver (src/database/mysql-driver.ts) against Kysely's contract: what it changes (prepared statements,
// a text fallback) and what it must keep (one connection per Kysely connection, transactions, savepoints).
const mysqlOnly = { skip: ENGINE !== 'mysql' && 'MySQL only' }

t.test('MySQL: data statements run prepared, transactions keep one connection, a full server falls back to text', mysqlOnly, async (t) => {
  const app = await build(t)
  const db = app.db
  // Com_stmt_execute counts the statements a connection ran prepared; `show` itself goes as text.
  const executed = async (on: typeof db) => {
    const { rows } = await sql<{ Value: string }>`show session status like 'Com_stmt_execute'`.execute(on)
    return Number(rows[0]?.Value)
  }
  // Counted on a pool of one, so that the counter read is the connection that ran the statement.
  const singleApp = await build(t, { env: { DB_POOL_SIZE: '1' } })
  // The mail deliverer's and the events' background queries would run on that one connection too.
  await singleApp.outbox.stop()
  await singleApp.sequencer.stop()
  const single = singleApp.db
  const before = await executed(single)
  const admin = await single.selectFrom('users').select(['id', 'created_at']).where('id', '>', 0).limit(1).executeTakeFirstOrThrow()
  t.equal((await executed(single)) - before, 1, 'a select outside a transaction ran as a prepared statement')
  t.type(admin.id, 'number', 'ids come back as numbers')
  t.type(admin.created_at, 'number', 'millisecond timestamps come back as numbers')

  const { id } = await db.selectFrom('users').select('id').where('id', '>', 0).limit(1).executeTakeFirstOrThrow()
  await db.transaction().execute(async (trx) => {
    const first = await sql<{ id: number }>`select connection_id() as id`.execute(trx)
    const ran = await executed(trx)
    await trx.updateTable('users').set({ name: 'Inside' }).where('id', '=', id).execute()
    t.equal((await executed(trx)) - ran, 1, 'an update in the transaction ran prepared on its connection')
    const second = await sql<{ id: number }>`select connection_id() as id`.execute(trx)
    t.equal(first.rows[0]!.id, second.rows[0]!.id, 'one connection for the whole transaction')
  })
  await t.rejects(db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ name: 'Rolled back' }).where('id', '=', id).execute()
    throw new Error('abort')
  }), /abort/)
  const { name } = await db.selectFrom('users').select('name').where('id', '=', id).executeTakeFirstOrThrow()
  t.equal(name, 'Inside', 'a failed transaction rolled back on its own connection')

  // With no prepared-statement slot left on the server, statements still run (as text).
  const { rows } = await sql<{ Value: string }>`show global variables like 'max_prepared_stmt_count'`.execute(db)
  const saved = Number(rows[0]!.Value)
  await sql`set global max_prepared_stmt_count = 0`.execute(db)
  try {
    const fresh = await db.selectFrom('users').select('name').where('name', '=', 'Inside').where('id', '>', -1).execute()
    t.equal(fresh.length, 1, 'a new statement text ran as text')
  } finally {
    await sql`set global max_prepared_stmt_count = ${sql.lit(saved)}`.execute(db)
  }
})

t.test('MySQL: a statement whose values follow a list\'s length is not prepared for each length', mysqlOnly, async (t) => {
  const app = await build(t, { env: { DB_POOL_SIZE: '1' } })
  await app.outbox.stop()
  await app.sequencer.stop()
  const db = app.db
  const counter = async (name: string) => {
    const { rows } = await sql<{ Value: string }>`show session status like ${sql.lit(name)}`.execute(db)
    return Number(rows[0]?.Value)
  }
  const ids = (n: number) => Array.from({ length: n }, (_, i) => -1 - i)
  const prepared = await counter('Com_stmt_prepare')
  for (let n = MAX_PREPARED_PARAMETERS + 1; n <= MAX_PREPARED_PARAMETERS + 40; n++) {
    t.same(await db.selectFrom('users').select('id').where('id', 'in', ids(n)).execute(), [])
  }
  t.equal((await counter('Com_stmt_prepare')) - prepared, 0, '40 lengths past the bound: none prepared, none kept on the connection')
  const before = await counter('Com_stmt_prepare')
  for (const n of [3, 4, 3]) await db.selectFrom('users').select('id').where('id', 'in', ids(n)).execute()
  t.equal((await counter('Com_stmt_prepare')) - before, 2, 'short lists are prepared once a length, and reused')
})

t.test('db.connection() holds one connection from its first statement to its end, as Kysely promises', mysqlOnly, async (t) => {
  const app = await build(t, { env: { DB_POOL_SIZE: '4' } })
  const db = app.db
  const ids = await db.connection().execute(async (conn) => {
    await sql`set @roster_probe = 42`.execute(conn)
    const seen: number[] = []
    for (let i = 0; i < 5; i++) {
      // Other work in between takes the pool's other connections.
      await Promise.all([sql`select sleep(0.01)`.execute(db), sql`select sleep(0.01)`.execute(db)])
      seen.push((await sql<{ id: number }>`select connection_id() as id`.execute(conn)).rows[0]!.id)
    }
    const probe = await sql<{ v: number }>`select @roster_probe as v`.execute(conn)
    t.equal(Number(probe.rows[0]!.v), 42, 'a session variable set on the connection is still there')
    return seen
  })
  t.equal(new Set(ids).size, 1, `one connection throughout (${ids.join(', ')})`)
})

t.test('savepoints: a rollback to one undoes only what followed it', mysqlOnly, async (t) => {
  const app = await build(t)
  const db = app.db
  const { id } = await db.selectFrom('users').select('id').where('id', '>', 0).limit(1).executeTakeFirstOrThrow()
  const trx = await db.startTransaction().execute()
  await trx.updateTable('users').set({ name: 'Before the savepoint' }).where('id', '=', id).execute()
  const sp = await trx.savepoint('probe').execute()
  await sp.updateTable('users').set({ name: 'After the savepoint' }).where('id', '=', id).execute()
  const back = await sp.rollbackToSavepoint('probe').execute()
  await back.releaseSavepoint('probe').execute()
  await back.commit().execute()
  const { name } = await db.selectFrom('users').select('name').where('id', '=', id).executeTakeFirstOrThrow()
  t.equal(name, 'Before the savepoint')
})
