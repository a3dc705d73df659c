import { statSync } from 'node:fs'
import { basename } from 'node:path'
import SQLite from 'better-sqlite3'
import t from 'tap'
import { cachingStatements } from '../../src/database/sqlite.js'
import { inTransaction } from '../../src/database/transaction.js'
import { isUnavailable } from '../../src/database/errors.js'
import { MIGRATION_LOCK } from '../../src/database/mysql.js'
import { sql } from 'kysely'
import { createConnection } from 'mysql2/promise'
import { assertProblem, build, ENGINE, freshDatabase, sharedDatabase } from '../helpers.js'

t.test('health', async (t) => {
  const app = await build(t)
  const live = await app.inject('/health/live')
  t.equal(live.statusCode, 200)
  t.same(live.json(), { status: 'ok' })
  const ready = await app.inject('/health/ready')
  t.equal(ready.statusCode, 200)
  t.same(ready.json(), { status: 'ok' })
})

t.test('migrations create the tables on ' + ENGINE, async (t) => {
  const app = await build(t)
  for (const table of ['users', 'emails', 'tokens'] as const) {
    const rows = await app.db.selectFrom(table).selectAll().execute()
    t.ok(Array.isArray(rows), `${table} exists`)
  }
  const admin = await app.db.selectFrom('users').select(['role', 'name']).executeTakeFirstOrThrow()
  t.equal(admin.role, 'admin', 'ADMIN_EMAIL created the first admin')
})

t.test('a start waits for another instance\'s migration of its database, and for no other database\'s', { skip: ENGINE !== 'mysql' && 'MySQL only' }, async (t) => {
  // Another instance is migrating this database: it holds the migration lock for longer than a request may take,
  // and longer than the 10 s Fastify gives a plugin by default.
  const db = await freshDatabase()
  t.teardown(db.drop)
  const other = await createConnection(db.url)
  t.teardown(() => other.end())
  await other.query(`select get_lock(${MIGRATION_LOCK}, 30)`)
  const HOLD_MS = 10_500
  let releasedAt = Infinity
  const released = new Promise((resolve) => setTimeout(resolve, HOLD_MS))
    .then(() => other.query(`select release_lock(${MIGRATION_LOCK})`)).then(() => { releasedAt = Date.now() })
  // Meanwhile a start on another database is not held up by it.
  const elsewhere = Date.now()
  await build(t)
  t.ok(Date.now() - elsewhere < HOLD_MS - 500, 'another database migrates at once')

  const app = await build(t, { url: db.url, env: { DB_TIMEOUT_MS: '200' } })
  const readyAt = Date.now()
  await released
  t.ok(readyAt >= releasedAt, `the start waited for the other migration to let go of the lock (${readyAt - releasedAt} ms after)`)
  const res = await app.inject({ method: 'GET', url: '/health/ready' })
  t.equal(res.statusCode, 200, 'then migrated, and ready')
})

t.test('the database itself refuses two addresses that differ only by case', async (t) => {
  const app = await build(t)
  const user = await app.db.selectFrom('users').select('id').executeTakeFirstOrThrow()
  const now = Date.now()
  const row = (address: string) => ({
    user_id: user.id, address, address_norm: address.toLowerCase(), primary_user_id: null, version: 1, created_at: now, updated_at: now
  })
  await app.db.insertInto('emails').values(row('Case@Example.com')).execute()
  await t.rejects(app.db.insertInto('emails').values(row('case@EXAMPLE.com')).execute(), 'unique index on the normalised address')
  const primary = (await app.db.selectFrom('emails').select('primary_user_id').where('primary_user_id', '=', user.id).execute())
  t.equal(primary.length, 1, 'one primary')
  await t.rejects(
    app.db.insertInto('emails').values({ ...row('other@example.com'), primary_user_id: user.id }).execute(),
    'a second primary for the same user is refused by the database'
  )
  await t.rejects(
    app.db.insertInto('emails').values({ ...row('ghost@example.com'), primary_user_id: 999_999 }).execute(),
    /foreign key|FOREIGN KEY/,
    'a primary marker naming no user is refused by its foreign key'
  )
})

t.test('errors are problem+json', async (t) => {
  const app = await build(t, {
    extend: (app) => {
      app.get('/boom', { config: { auth: 'public' } }, async () => {
        throw new Error('select * from secrets where password = 42')
      })
    }
  })

  const notFound = await app.inject('/no/such/route')
  assertProblem(t, notFound, 404, 'NOT_FOUND')

  const boom = await app.inject('/boom')
  assertProblem(t, boom, 500, 'INTERNAL')
  t.notMatch(boom.body, /select|secrets|password|at /, 'no internals in a 500')

  const malformed = await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload: '{"name": ' })
  assertProblem(t, malformed, 400, 'VALIDATION_FAILED', 'malformed JSON')

  const unknownField = await app.inject({ method: 'POST', url: '/users', payload: { name: 'A', email: 'a@example.com', password: 'password-1', admin: true } })
  assertProblem(t, unknownField, 400, 'VALIDATION_FAILED', 'unknown field')
  t.same(unknownField.json().errors, [{ path: '/admin', in: 'body', message: 'is not a known field' }])

  const badAddress = await app.inject({ method: 'POST', url: '/users', payload: { name: 'A', email: 'not-an-address', password: 'password-1' } })
  assertProblem(t, badAddress, 400, 'VALIDATION_FAILED', 'bad address')
  t.equal(badAddress.json().errors[0].path, '/email')

  const tooLong = await app.inject({ method: 'POST', url: '/users', payload: { name: 'x'.repeat(201), email: 'a@example.com', password: 'password-1' } })
  assertProblem(t, tooLong, 400, 'VALIDATION_FAILED', 'over-long value')

  const wrongType = await app.inject({ method: 'POST', url: '/users', payload: { name: 42, email: 'a@example.com', password: 'password-1' } })
  assertProblem(t, wrongType, 400, 'VALIDATION_FAILED', 'wrong type')

  const media = await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/xml' }, payload: '<user/>' })
  assertProblem(t, media, 415, 'UNSUPPORTED_MEDIA_TYPE')

  const large = await app.inject({ method: 'POST', url: '/users', payload: { name: 'x'.repeat(40_000), email: 'a@example.com', password: 'password-1' } })
  assertProblem(t, large, 413, 'PAYLOAD_TOO_LARGE')

  const proto = await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload: '{"__proto__": {"role": "admin"}, "name": "A", "email": "p@example.com", "password": "password-1"}' })
  assertProblem(t, proto, 400, 'VALIDATION_FAILED', 'prototype poisoning')

  const count = await app.db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
  t.equal(Number(count.n), 1, 'none of the refused requests wrote a user (only the admin exists)')
})

t.test('readiness answers 503 when the database is gone', async (t) => {
  const app = await build(t)
  await app.db.destroy()
  const ready = await app.inject('/health/ready')
  assertProblem(t, ready, 503, 'UNAVAILABLE')
  t.equal(ready.headers['retry-after'], '5')
})

t.test('logs never carry the bearer token', async (t) => {
  const lines: string[] = []
  const { buildApp } = await import('../../src/app.js')
  const { loadConfig } = await import('../../src/config.js')
  const app = await buildApp(loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'debug' }), {
    logStream: { write: (line: string) => { lines.push(line) } }
  })
  app.get('/echo-headers', { config: { auth: 'public' } }, async (request) => {
    request.log.info({ headers: request.headers }, 'headers seen')
    return { ok: true }
  })
  t.teardown(() => app.close())
  await app.inject({ url: '/users', headers: { authorization: 'Bearer very-secret-token' } })
  await app.inject({ url: '/echo-headers', headers: { authorization: 'Bearer very-secret-token' } })
  t.match(lines.join('\n'), /headers seen/, 'requests were logged')
  t.notMatch(lines.join('\n'), /very-secret-token/)
})

t.test('the embedded engine keeps prepared statements, bounded, least recently used first out', async (t) => {
  const sqlite = new SQLite(':memory:')
  const db = cachingStatements(sqlite, 2)
  t.teardown(() => db.close())
  const a = db.prepare('select 1 as n')
  t.equal(db.prepare('select 1 as n'), a, 'the same text gives the same statement')
  t.same(a.all([]), [{ n: 1 }])
  const b = db.prepare('select 2 as n')
  db.prepare('select 1 as n') // a is now the most recently used
  db.prepare('select 3 as n') // evicts b
  t.equal(db.prepare('select 1 as n'), a, 'a recently used statement stays')
  t.not(db.prepare('select 2 as n'), b, 'the least recently used one was dropped and is prepared anew')
  sqlite.exec('create table t (x integer)')
  const insert = db.prepare('insert into t (x) values (?)')
  insert.run([1])
  db.prepare('insert into t (x) values (?)').run([2])
  t.same(db.prepare('select x from t order by x').all([]), [{ x: 1 }, { x: 2 }], 'a kept statement runs with new values')
})

t.test('every duration in seconds accepts 1, as the contract says (tests run with lifetimes of a few seconds)', async (t) => {
  const { loadConfig } = await import('../../src/config.js')
  const { Config } = await import('../../schemas/config.js')
  const durations = Object.keys(Config.properties).filter((key) => key.endsWith('_SECONDS'))
  t.ok(durations.includes('EMAIL_REVERT_TTL_SECONDS'))
  for (const key of durations) t.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:', [key]: '1' })[key as keyof ReturnType<typeof loadConfig>], 1, key)
})

t.test('logs never carry e-mail addresses; answers carry nosniff', async (t) => {
  const lines: string[] = []
  const { buildApp } = await import('../../src/app.js')
  const { loadConfig } = await import('../../src/config.js')
  const app = await buildApp(loadConfig({ DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'debug', ADMIN_EMAIL: 'root@example.com', ADMIN_PASSWORD: 'root-password-1' }), {
    logStream: { write: (line: string) => { lines.push(line) } }
  })
  t.teardown(() => app.close())
  const token = (await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'root@example.com', password: 'root-password-1' } })).json().token
  const lookup = await app.inject({ url: '/users/email/secret.person%40example.com', headers: { authorization: `Bearer ${token}` } })
  await app.inject({ url: '/users?email=secret.person%40example.com&limit=5', headers: { authorization: `Bearer ${token}` } })
  await app.inject({ url: '/users?status=ACTIVE&email=secret.person@example.com', headers: { authorization: `Bearer ${token}` } })
  const log = lines.join('\n')
  t.match(log, /\/users\/email\/\[redacted\]/, 'the lookup path is logged, redacted')
  t.match(log, /email=\[redacted\]&limit=5/, 'the filter is logged, redacted')
  t.notMatch(log, /secret\.person/, 'the address appears nowhere')
  t.equal(lookup.headers['x-content-type-options'], 'nosniff')
  t.equal((await app.inject('/no-such-route')).headers['x-content-type-options'], 'nosniff', 'errors too')
})

t.test('the embedded database file is readable by its owner only', { skip: ENGINE !== 'sqlite' && 'SQLite only' }, async (t) => {
  const url = await sharedDatabase(t)
  const file = url.slice('sqlite:'.length)
  await build(t, { url })
  for (const f of [file, `${file}-wal`]) t.equal(statSync(f).mode & 0o777, 0o600, `${basename(f)} is 0600`)
})

/** An app on an embedded file with a `probe` table, and another writer of the same file (a second process, a shell). */
async function withOtherWriter(t: Parameters<typeof build>[0]) {
  const url = await sharedDatabase(t)
  const app = await build(t, { url })
  await sql`create table probe (x integer)`.execute(app.db)
  const other = new SQLite(url.slice('sqlite:'.length))
  t.teardown(() => other.close())
  return { app, other }
}

/** The event loop's longest stall from now on: SQLite's own wait for a lock (busy_timeout) would stop it whole. */
function stalls(t: Parameters<typeof build>[0]) {
  let last = Date.now()
  let longest = 0
  const ticking = setInterval(() => {
    longest = Math.max(longest, Date.now() - last)
    last = Date.now()
  }, 5)
  t.teardown(() => clearInterval(ticking))
  return () => longest
}

/** How long a statement of the app's own took to answer, in ms. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = Date.now()
  await work()
  return Date.now() - started
}

t.test('another process\'s write lock on the embedded file is waited for between attempts, never inside the driver', { skip: ENGINE !== 'sqlite' && 'SQLite only' }, async (t) => {
  const { app, other } = await withOtherWriter(t)
  const longestStall = stalls(t)
  other.exec('begin immediate')
  // A transaction whose first statement writes, and a statement outside a transaction: both would wait in SQLite.
  let attempts = 0
  const together = inTransaction(app.db, async (trx) => {
    attempts++
    await sql`insert into probe (x) values (2)`.execute(trx)
    return (await sql<{ n: number }>`select count(*) as n from probe`.execute(trx)).rows[0]!.n
  })
  const alone = sql`insert into probe (x) values (1)`.execute(app.db)
  await new Promise((resolve) => setTimeout(resolve, 100))
  // Meanwhile the one connection is not held by the waiting writes: reads through it answer.
  const read = await timed(() => sql`select count(*) as n from probe`.execute(app.db))
  const ping = await timed(() => sql`select 1`.execute(app.db))
  await new Promise((resolve) => setTimeout(resolve, 300))
  other.prepare('insert into probe (x) values (3)').run()
  other.exec('commit')
  await alone
  t.ok((await together) >= 2, 'both writes landed once the lock was let go')
  t.ok(attempts > 1, `the transaction met the lock and was run again (${attempts} runs)`)
  t.same(other.prepare('select x from probe order by x').all(), [{ x: 1 }, { x: 2 }, { x: 3 }], 'all three rows in')
  t.ok(read < 200 && ping < 200, `reads went on meanwhile (${read} and ${ping} ms)`)
  t.ok(longestStall() < 150, `the event loop went on meanwhile (its longest stall ${longestStall()} ms, the lock held 400 ms)`)
})

t.test('a statement outside a transaction gives up after 5 s of another process\'s lock: unavailable, nothing written', { skip: ENGINE !== 'sqlite' && 'SQLite only' }, async (t) => {
  const { app, other } = await withOtherWriter(t)
  const longestStall = stalls(t)
  other.exec('begin immediate')
  const started = Date.now()
  const refused = sql`insert into probe (x) values (1)`.execute(app.db).then(() => undefined, (err: unknown) => err)
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const read = await timed(() => sql`select count(*) as n from probe`.execute(app.db))
  const err = await refused
  const waited = Date.now() - started
  other.exec('commit')
  t.ok(isUnavailable(err), `refused as the database being unavailable (${String(err)})`)
  t.ok(waited >= 5000 && waited < 6500, `after its 5 s (${waited} ms)`)
  t.ok(read < 200, `a read went on meanwhile (${read} ms)`)
  t.same(other.prepare('select x from probe').all(), [], 'nothing written')
  t.ok(longestStall() < 150, `the event loop went on meanwhile (its longest stall ${longestStall()} ms)`)
})

t.test('closing the app while a statement waits for another process\'s lock ends it as unavailable at once', { skip: ENGINE !== 'sqlite' && 'SQLite only' }, async (t) => {
  const { app, other } = await withOtherWriter(t)
  other.exec('begin immediate')
  const refused = sql`insert into probe (x) values (1)`.execute(app.db).then(() => undefined, (err: unknown) => err)
  await new Promise((resolve) => setTimeout(resolve, 100))
  const closing = await timed(() => app.close())
  const err = await refused
  other.exec('commit')
  t.ok(isUnavailable(err), `the waiting statement is refused as the database being unavailable, not run on the closed file (${String(err)})`)
  t.ok(closing < 1000, `the close did not wait out the statement's 5 s (${closing} ms)`)
  t.same(other.prepare('select x from probe').all(), [], 'nothing written')
})

t.test('an embedded transaction that meets another process\'s write between its read and its write is run again', { skip: ENGINE !== 'sqlite' && 'SQLite only' }, async (t) => {
  const { app, other } = await withOtherWriter(t)
  let runs = 0
  const started = Date.now()
  const seen = await inTransaction(app.db, async (trx) => {
    runs++
    const { n } = (await sql<{ n: number }>`select count(*) as n from probe`.execute(trx)).rows[0]!
    // The first run read from a snapshot that this write, committed now, leaves behind: its own write below fails
    // with SQLITE_BUSY_SNAPSHOT, which no wait mends.
    if (runs === 1) other.prepare('insert into probe (x) values (2)').run()
    await sql`insert into probe (x) values (1)`.execute(trx)
    return n
  })
  t.equal(runs, 2, 'run again')
  t.ok(Date.now() - started < 1000, 'at once: a statement inside a transaction is never waited on, its snapshot is stale')
  t.equal(seen, 1, 'reading afresh what the other process wrote')
  t.same(other.prepare('select x from probe order by x').all(), [{ x: 1 }, { x: 2 }], 'both writes in')
})
