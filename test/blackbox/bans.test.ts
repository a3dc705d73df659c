import t from 'tap'
import { createDatabase } from '../../src/database/index.js'
import { ADMIN } from '../helpers.js'
import { call, signUp, startBuilt } from './service.js'

/**
 * A ban's end, on the built service as `npm start` runs it: the lift and its event come by no request, from the
 * service's own background work, and the same process lives on.
 */
t.test('a ban with an end is lifted by the running service itself, its event written, and it lives on', async (t) => {
  const service = await startBuilt(t, { PURGE_INTERVAL_SECONDS: '1' })
  const login = await call(service, 'POST', '/auth/tokens', { body: { email: ADMIN.email, password: ADMIN.password } })
  const admin = { authorization: `Bearer ${String(login.body.token)}` }
  const user = await signUp(service, 'lifted@example.com')
  const until = new Date(Date.now() + 2000).toISOString()
  const banned = await call(service, 'PUT', `/users/${user.id}/status`, { headers: admin, body: { status: 'BANNED', reason: 'cooling off', until } })
  t.equal(banned.status, 200)

  // From here on, no request: the database is watched directly.
  const { db } = createDatabase({ url: service.databaseUrl })
  t.teardown(() => db.destroy())
  const lifted = () => db.selectFrom('events').select(['actor_type', 'occurred_at']).where('type', '=', 'user.status_changed')
    .where('user_id', '=', user.id).where('actor_type', '=', 'system').execute()
  let rows = await lifted()
  for (let i = 0; i < 150 && rows.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    rows = await lifted()
  }
  t.equal(rows.length, 1, 'the lift was written, once, by the system')
  t.ok(rows[0]!.occurred_at >= Date.parse(until), 'not before the end')
  t.ok(rows[0]!.occurred_at - Date.parse(until) < 60_000, 'within a minute of it')
  const row = await db.selectFrom('users').select(['status', 'ban_reason', 'banned_until']).where('id', '=', user.id).executeTakeFirstOrThrow()
  t.same(row, { status: 'ACTIVE', ban_reason: null, banned_until: null })
  t.equal((await call(service, 'POST', '/auth/tokens', { body: { email: 'lifted@example.com', password: 'password-123' } })).status, 201, 'it signs in')
  t.ok(service.running(), 'the same process is still running')
  t.same(service.lines.filter((line) => /could not be lifted/.test(line)), [], 'no lift failed')
})
