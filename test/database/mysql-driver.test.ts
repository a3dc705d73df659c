import { sql } from 'kysely'
import t from 'tap'
import { createDatabase } from '../../src/database/index.js'
import { MAX_PREPARED_PARAMETERS } from '../../src/database/mysql-driver.js'
import { build, ENGINE, sharedDatabase } from '../helpers.js'

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

t.test('MySQL: a transaction sends no begin; it begins with its first statement, on a pool of its own, and leaves none open', mysqlOnly, async (t) => {
  const app = await build(t, { env: { DB_POOL_SIZE: '1' } })
  await app.outbox.stop()
  await app.sequencer.stop()
  const db = app.db
  const { id, name: original } = await db.selectFrom('users').select(['id', 'name']).where('id', '>', 0).limit(1).executeTakeFirstOrThrow()
  const nameSeen = async () => (await db.selectFrom('users').select('name').where('id', '=', id).executeTakeFirstOrThrow()).name
  type Seen = { connection: number; autocommit: number; begins: number }
  // What a connection says of itself: its id, autocommit, and the `begin`s it has been sent.
  const look = async (on: typeof db): Promise<Seen> => {
    const { rows } = await sql<Seen>`select connection_id() as connection, @@autocommit as autocommit,
      (select variable_value from information_schema.session_status where variable_name = 'COM_BEGIN') as begins`.execute(on)
    const r = rows[0]!
    return { connection: Number(r.connection), autocommit: Number(r.autocommit), begins: Number(r.begins) }
  }
  const outside = await look(db)
  t.equal(outside.autocommit, 1, 'statements outside a transaction commit by themselves')
  const first = await db.transaction().execute(async (trx) => {
    const seen = await look(trx)
    await trx.updateTable('users').set({ name: 'In a transaction' }).where('id', '=', id).execute()
    t.equal(await nameSeen(), original, 'the update is not seen outside before the commit: it began a transaction')
    return seen
  })
  t.equal(await nameSeen(), 'In a transaction', 'and is seen once committed')
  t.not(first.connection, outside.connection, 'the transaction ran on a connection of the transactions\' pool')
  t.equal(first.autocommit, 0, 'where autocommit is off')
  const later = await db.transaction().execute((trx) => look(trx))
  t.equal(later.connection, first.connection, 'the next transaction got the same connection (a pool of one)')
  t.equal(later.begins, first.begins, 'no `begin` was sent for either transaction')

  await t.rejects(db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ name: 'Rolled back' }).where('id', '=', id).execute()
    throw new Error('abort')
  }), /abort/)
  // Had the rollback not been sent, the next transaction on that connection would commit the update with its own.
  await db.transaction().execute(async (trx) => {
    t.equal((await look(trx)).connection, first.connection, 'the same connection again')
    await trx.selectFrom('users').select('id').where('id', '=', id).forUpdate().execute()
  })
  t.equal(await nameSeen(), 'In a transaction', 'the transaction that failed was rolled back, and nothing of it came back later')

  // A `db.connection()` that ran a statement holds a connection of the statements' pool: a transaction on it begins
  // with a `begin`, and rolls back as any other.
  await db.connection().execute(async (conn) => {
    const held = await look(conn)
    await t.rejects(conn.transaction().execute(async (trx) => {
      const inside = await look(trx)
      t.equal(inside.connection, held.connection, 'the transaction kept the connection\'s own connection')
      t.equal(inside.begins, held.begins + 1, 'which began it with a `begin`')
      await trx.updateTable('users').set({ name: 'Rolled back too' }).where('id', '=', id).execute()
      throw new Error('abort')
    }), /abort/)
    t.equal((await look(conn)).autocommit, 1, 'after it the connection commits each statement by itself again')
  })
  t.equal(await nameSeen(), 'In a transaction', 'what it wrote was rolled back')

  // A `db.connection()` whose first statement is a transaction's holds a connection of the transactions' pool, where
  // autocommit is off: what it runs after the transaction still commits by itself, on the same connection.
  await db.connection().execute(async (conn) => {
    const inside = await conn.transaction().execute((trx) => look(trx))
    await conn.updateTable('users').set({ name: 'After a transaction' }).where('id', '=', id).execute()
    t.equal(await nameSeen(), 'After a transaction', 'a statement after the transaction is seen outside at once')
    t.equal((await look(conn)).connection, inside.connection, 'on the connection the transaction had')
    // A read streamed there and left after its first row: the read's transaction is ended all the same.
    for await (const row of conn.selectFrom('users').select('id').stream()) {
      t.ok(row.id, 'a streamed row')
      break
    }
    const { rows } = await sql<{ open: number }>`select @@in_transaction as open`.execute(conn)
    t.equal(Number(rows[0]!.open), 0, 'no transaction is left open by a stream stopped early')
  })
  await db.transaction().execute(async (trx) => { await trx.selectFrom('users').select('id').where('id', '=', id).forUpdate().execute() })
  t.equal(await nameSeen(), 'After a transaction', 'and nothing was left open on the connection')
})

t.test('MySQL: a transaction whose first statement gets no connection in time ends with that, waiting for none to roll back', mysqlOnly, async (t) => {
  const { db, poolUse } = createDatabase({ url: await sharedDatabase(t), poolSize: 1, timeoutMs: 300 })
  t.teardown(() => db.destroy())
  // The transactions' pool's one connection, held by a transaction until `free` is called.
  let free: (() => void) | undefined
  const holder = db.transaction().execute(async (trx) => {
    await sql`select 1`.execute(trx)
    await new Promise<void>((resolve) => { free = resolve })
  })
  while (!free) await new Promise((resolve) => setTimeout(resolve, 10))
  const waitsBefore = poolUse!().waits
  await t.rejects(db.transaction().execute((trx) => sql`select 1`.execute(trx)), { code: 'DB_TIMEOUT' }, 'the statement waited out its deadline')
  t.equal(poolUse!().waits - waitsBefore, 1, 'and the transaction asked for a connection once: its rollback, with nothing begun, sent nothing')
  free()
  await holder
  t.equal(poolUse!().inUse, 0, 'no connection is held afterwards')
})
