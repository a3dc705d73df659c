import t from 'tap'
import { createDatabase } from '../../src/database/index.js'
import { call, signUp, startBuilt } from './service.js'

/**
 * The background purges of the built service as `npm start` runs it, over time: expired sessions and tokens, events
 * past their retention and idempotency keys past their lifetime leave the database by no request, turn after turn
 * (every PURGE_INTERVAL_SECONDS), and the same process lives on. The rows are made by requests with the usual
 * lifetimes, counted, then made to have expired in the service's own database, so that no row goes before it is
 * counted however slow the host.
 */
t.test('the built service purges what has expired, again and again, by no request; it lives on', async (t) => {
  const service = await startBuilt(t, { PURGE_INTERVAL_SECONDS: '1' })
  const { db } = createDatabase({ url: service.databaseUrl })
  t.teardown(() => db.destroy())
  const tables = ['sessions', 'tokens', 'refresh_tokens', 'events', 'idempotency_keys'] as const
  const count = async (table: typeof tables[number]) =>
    Number((await db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  const counts = async () => Object.fromEntries(await Promise.all(tables.map(async (table) => [table, await count(table)] as const)))
  const none = Object.fromEntries(tables.map((table) => [table, 0]))

  for (const turn of [1, 2]) {
    const user = await signUp(service, `purged-${turn}@example.com`)
    t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).status, 200)
    const keyed = await call(service, 'POST', '/users', {
      headers: { 'idempotency-key': `0f6b0d5e-0000-4000-8000-00000000000${turn}` },
      body: { name: 'Keyed', email: `keyed-${turn}@example.com`, password: 'password-123' }
    })
    t.equal(keyed.status, 201)
    const before = await counts()
    t.ok(tables.every((table) => before[table]! > 0), `turn ${turn}: rows in every table (${JSON.stringify(before)})`)

    // Everything expires: the sessions and their tokens, the kept answers, and the events fall out of the retention
    // (30 days by default). An event not yet placed in the feed is kept until it is.
    const past = Date.now() - 31 * 86_400_000
    await db.updateTable('sessions').set({ expires_at: past }).execute()
    await db.updateTable('tokens').set({ expires_at: past }).execute()
    await db.updateTable('refresh_tokens').set({ expires_at: past }).execute()
    await db.updateTable('idempotency_keys').set({ expires_at: past }).execute()
    await db.updateTable('events').set({ occurred_at: past }).execute()

    let left = before
    const deadline = Date.now() + 20_000
    while (Object.values(left).some((n) => n > 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      left = await counts()
    }
    t.same(left, none, `turn ${turn}: every expired row is gone`)
    t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).status, 401, 'the expired token opens nothing')
  }

  t.equal((await call(service, 'GET', '/health/ready')).status, 200)
  t.ok(service.running(), 'the same process is still running')
  t.same(service.lines.filter((line) => /could not be purged|could not place committed events/.test(line)), [], 'no background run failed')
})
