import t from 'tap'
import { createDatabase } from '../../src/database/index.js'
import { ADMIN } from '../helpers.js'
import { call, signUp, startBuilt } from './service.js'

/**
 * A deletion's grace, on the built service as `npm start` runs it: the final deletion and the erasure come by no
 * request, from the service's own background work, and the same process lives on.
 */
t.test('a scheduled deletion is made final by the running service itself, the user erased, and it lives on', async (t) => {
  const service = await startBuilt(t, { PURGE_INTERVAL_SECONDS: '1', ACCOUNT_DELETION_GRACE_SECONDS: '2' })
  const login = await call(service, 'POST', '/auth/tokens', { body: { email: ADMIN.email, password: ADMIN.password } })
  const admin = { authorization: `Bearer ${String(login.body.token)}` }
  const user = await signUp(service, 'leaving.person@example.com')
  const scheduled = await call(service, 'DELETE', `/users/${user.id}`, { headers: admin })
  t.equal(scheduled.status, 202)
  const due = Date.parse(String(scheduled.body.deletion_scheduled_at))

  // From here on, no request: the database is watched directly.
  const { db } = createDatabase({ url: service.databaseUrl })
  t.teardown(() => db.destroy())
  const gone = async () => (await db.selectFrom('users').select('id').where('id', '=', user.id).execute()).length === 0 &&
    (await db.selectFrom('erasures').select('user_id').execute()).length === 0
  for (let i = 0; i < 150 && !(await gone()); i++) await new Promise((resolve) => setTimeout(resolve, 200))
  t.ok(await gone(), 'the user was deleted and its erasure finished')
  const events = await db.selectFrom('events').select(['type', 'actor_type', 'erased', 'data', 'occurred_at']).where('user_id', '=', user.id).execute()
  const deleted = events.find((e) => e.type === 'user.deleted')
  t.equal(deleted?.actor_type, 'system', 'by the system')
  t.ok(deleted!.occurred_at >= due, 'not before the grace ended')
  t.ok(events.every((e) => e.erased === 1 && e.data === '{}'), `each of its ${events.length} events erased`)
  t.notOk(JSON.stringify(events).includes('leaving.person'), 'its address is nowhere in them')
  t.equal((await call(service, 'POST', '/auth/tokens', { body: { email: 'leaving.person@example.com', password: 'password-123' } })).status, 401)
  t.ok(service.running(), 'the same process is still running')
  t.same(service.lines.filter((line) => /could not be made/.test(line)), [], 'no turn failed')
})
