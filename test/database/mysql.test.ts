import { sql } from 'kysely'
import t from 'tap'
import { createDatabase } from '../../src/database/index.js'
import { createConnection } from 'mysql2/promise'
import { adminUser, build, ENGINE, newUser, sharedDatabase } from '../helpers.js'

// Kysely's MySQL dialect as src/database/mysql.ts sets it up: Kysely's contract kept (one connection per transaction
// and per `db.connection()`, savepoints), every connection READ COMMITTED, and the statement deadline Kysely lacks.
const mysqlOnly = { skip: ENGINE !== 'mysql' && 'MySQL only' }

t.test('MySQL: values come back typed, a transaction keeps one connection and rolls back on its own', mysqlOnly, async (t) => {
  const app = await build(t)
  const db = app.db
  const admin = await db.selectFrom('users').select(['id', 'created_at']).where('id', '>', 0).limit(1).executeTakeFirstOrThrow()
  t.type(admin.id, 'number', 'ids come back as numbers')
  t.type(admin.created_at, 'number', 'millisecond timestamps come back as numbers')

  const { id } = admin
  await db.transaction().execute(async (trx) => {
    const first = await sql<{ id: number }>`select connection_id() as id`.execute(trx)
    await trx.updateTable('users').set({ name: 'Inside' }).where('id', '=', id).execute()
    const second = await sql<{ id: number }>`select connection_id() as id`.execute(trx)
    t.equal(first.rows[0]!.id, second.rows[0]!.id, 'one connection for the whole transaction')
    const { rows } = await sql<{ level: string }>`select @@transaction_isolation as level`.execute(trx).catch(
      () => sql<{ level: string }>`select @@tx_isolation as level`.execute(trx))
    t.equal(rows[0]!.level, 'READ-COMMITTED', 'read committed')
  })
  await t.rejects(db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ name: 'Rolled back' }).where('id', '=', id).execute()
    throw new Error('abort')
  }), /abort/)
  const { name } = await db.selectFrom('users').select('name').where('id', '=', id).executeTakeFirstOrThrow()
  t.equal(name, 'Inside', 'a failed transaction rolled back on its own connection')
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

t.test('MySQL: a transaction whose first statement gets no connection in time ends with that, waiting for none to roll back', mysqlOnly, async (t) => {
  const { db, poolUse } = createDatabase({ url: await sharedDatabase(t), poolSize: 1, timeoutMs: 300 })
  t.teardown(() => db.destroy())
  // The pool's one connection, held by a transaction until `free` is called.
  let free: (() => void) | undefined
  const holder = db.transaction().execute(async (trx) => {
    await sql`select 1`.execute(trx)
    await new Promise<void>((resolve) => { free = resolve })
  })
  while (!free) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(poolUse!().inUse, 1, 'the holder\'s connection is in use')
  const waitsBefore = poolUse!().waits
  await t.rejects(db.transaction().execute((trx) => sql`select 1`.execute(trx)), { code: 'DB_TIMEOUT' }, 'the statement waited out its deadline')
  t.equal(poolUse!().waits - waitsBefore, 1, 'and the transaction asked for a connection once: with nothing begun, it sent no rollback')
  free()
  await holder
  t.equal(poolUse!().inUse, 0, 'no connection is held afterwards')
})

t.test('MySQL: a statement past its deadline fails with DB_TIMEOUT (503), and its connection is not used again', mysqlOnly, async (t) => {
  const { db, poolUse } = createDatabase({ url: await sharedDatabase(t), poolSize: 1, timeoutMs: 300 })
  t.teardown(() => db.destroy())
  const before = (await sql<{ id: number }>`select connection_id() as id`.execute(db)).rows[0]!.id
  const started = Date.now()
  await t.rejects(sql`select sleep(2)`.execute(db), { code: 'DB_TIMEOUT' }, 'answered at its deadline')
  t.ok(Date.now() - started < 1000, `without waiting for the server (${Date.now() - started} ms)`)
  await t.rejects(db.transaction().execute(async (trx) => {
    await sql`select 1`.execute(trx)
    await sql`select sleep(2)`.execute(trx)
  }), { code: 'DB_TIMEOUT' }, 'in a transaction too, its rollback not sent on the broken connection')
  const after = (await sql<{ id: number }>`select connection_id() as id`.execute(db)).rows[0]!.id
  t.not(after, before, 'the next statement ran on a new connection')
  t.equal(poolUse!().inUse, 0, 'none held')
})

t.test('MySQL: a ban, a demotion or a deletion waits on no other user\'s row another transaction is writing', mysqlOnly, async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const [busy, banned, demoted, gone] = [await newUser(app), await newUser(app), await newUser(app), await newUser(app)]
  await app.inject({ method: 'PUT', url: `/users/${demoted.id}/role`, headers: admin.headers, payload: { role: 'admin' } })
  // A plain user's row held by another transaction, as a long write holds it.
  const conn = await createConnection(app.config.DATABASE_URL!)
  t.teardown(() => conn.end())
  await conn.query('begin')
  await conn.query('select id from users where id = ? for update', [busy.id])
  const writes = [
    ['ban', { method: 'PUT', url: `/users/${banned.id}/status`, payload: { status: 'BANNED' } }, 200],
    ['demotion', { method: 'PUT', url: `/users/${demoted.id}/role`, payload: { role: 'user' } }, 200],
    ['deletion', { method: 'DELETE', url: `/users/${gone.id}` }, 204]
  ] as const
  for (const [what, request, status] of writes) {
    const res = await app.inject({ ...request, headers: admin.headers })
    t.equal(res.statusCode, status, `the ${what} (${res.body.slice(0, 120)})`)
  }
  await conn.query('rollback')
})
