import { sql } from 'kysely'
import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, migratingDatabase, newUser } from '../helpers.js'

const signUp = (app: App, key: string | undefined, email: string, extra: { remoteAddress?: string; name?: string } = {}) =>
  app.inject({
    method: 'POST', url: '/users', remoteAddress: extra.remoteAddress,
    headers: key === undefined ? {} : { 'idempotency-key': key },
    payload: { name: extra.name ?? 'Retry Safe', email, password: 'password-123' }
  })

const usersWith = async (app: App, email: string) =>
  Number((await app.db.selectFrom('emails').select((eb) => eb.fn.countAll().as('n')).where('address_norm', '=', email).executeTakeFirstOrThrow()).n)

const mailsTo = async (app: App, email: string) =>
  Number((await app.db.selectFrom('outbox').select((eb) => eb.fn.countAll().as('n')).where('recipient', '=', email).executeTakeFirstOrThrow()).n)

t.test('a retry with the same key and body answers the first answer again and creates nothing more', async (t) => {
  const app = await build(t)
  const first = await signUp(app, 'b7c6a1e2-0000-4000-8000-000000000001', 'once@example.com')
  t.equal(first.statusCode, 201)
  t.notOk(first.headers['idempotent-replayed'])
  const again = await signUp(app, 'b7c6a1e2-0000-4000-8000-000000000001', 'once@example.com', { remoteAddress: '10.1.1.1' })
  t.equal(again.statusCode, 201, 'the same status')
  t.equal(again.body, first.body, 'the same body')
  t.equal(again.headers.location, first.headers.location, 'the same Location')
  t.equal(again.headers.etag, first.headers.etag, 'the same ETag')
  t.equal(again.headers['content-type'], first.headers['content-type'])
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.equal(await usersWith(app, 'once@example.com'), 1, 'one user')
  t.equal(await mailsTo(app, 'once@example.com'), 1, 'one verification mail')

  const without = await signUp(app, undefined, 'once@example.com')
  assertProblem(t, without, 409, 'EMAIL_TAKEN', 'without a key, a second sign-up is a second request')
})

t.test('kept answers are sealed: a login replayed gives its tokens again, the table never shows them', async (t) => {
  const app = await build(t)
  await signUp(app, undefined, 'sealed@example.com')
  const login = () => app.inject({
    method: 'POST', url: '/auth/tokens', headers: { 'idempotency-key': 'login-key-1' }, payload: { email: 'sealed@example.com', password: 'password-123' }
  })
  const first = await login()
  t.equal(first.statusCode, 201)
  const again = await login()
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.equal(again.json().token, first.json().token, 'the same tokens: a lost answer is not a lost session')
  const rows = await app.db.selectFrom('idempotency_keys').select(['key_hash', 'body']).execute()
  t.equal(rows.length, 1)
  t.notOk(rows[0]!.body!.includes(first.json().token), 'the access token is not stored readable')
  t.notOk(rows[0]!.body!.includes(first.json().refresh_token), 'nor the refresh token')
  t.notOk(rows[0]!.key_hash.includes('login-key-1'), 'nor the key')
  const sessions = await app.db.selectFrom('sessions').select('id').execute()
  t.equal(sessions.length, 1, 'one session for the two requests')
})

t.test('a deletion drops the kept answers that present its user: a retry after it is not a replay', async (t) => {
  const app = await build(t, { env: { VERIFICATION_RESEND_SECONDS: '1' } })
  const user = await newUser(app, { email: 'leaving@example.com' })
  const other = await newUser(app, { email: 'staying@example.com' })
  const login = (email: string, password: string) => app.inject({
    method: 'POST', url: '/auth/tokens', headers: { 'idempotency-key': `login-${email}` }, payload: { email, password }
  })
  t.equal((await login(user.email, user.password)).statusCode, 201)
  t.equal((await login(other.email, other.password)).statusCode, 201)
  const added = await app.inject({
    method: 'POST', url: `/users/${user.id}/emails`, headers: { ...user.headers, 'idempotency-key': 'add-1' }, payload: { address: 'second@example.com' }
  })
  t.equal(added.statusCode, 201)
  await new Promise((resolve) => setTimeout(resolve, 1100)) // VERIFICATION_RESEND_SECONDS since the address was added
  const sent = await app.inject({
    method: 'POST', url: `/users/${user.id}/emails/${added.json<{ id: number }>().id}/verification`, headers: { ...user.headers, 'idempotency-key': 'send-1' }
  })
  t.equal(sent.statusCode, 202, 'an answer that names the user only by an address of it')
  const kept = await app.db.selectFrom('idempotency_keys').select('user_id').orderBy('id').execute()
  t.same(kept.map((k) => k.user_id), [user.id, other.id, user.id, user.id], 'each kept answer names the user it presents')

  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: user.headers })).statusCode, 204)
  const left = await app.db.selectFrom('idempotency_keys').select('user_id').execute()
  t.same(left.map((k) => k.user_id), [other.id], 'only the other user\'s answer is left')
  const retried = await login(user.email, user.password)
  assertProblem(t, retried, 401, 'INVALID_CREDENTIALS', 'the retry runs again: its kept tokens and user are gone')
  t.equal((await login(other.email, other.password)).headers['idempotent-replayed'], 'true', 'the other user\'s retry is still a replay')
})

t.test('the same key with another request is 422; a malformed key is 400', async (t) => {
  const app = await build(t)
  t.equal((await signUp(app, 'key-1', 'first@example.com')).statusCode, 201)
  assertProblem(t, await signUp(app, 'key-1', 'second@example.com'), 422, 'IDEMPOTENCY_KEY_REUSED', 'another body')
  assertProblem(t, await signUp(app, 'key-1', 'first@example.com', { name: 'Other Name' }), 422, 'IDEMPOTENCY_KEY_REUSED', 'another field')
  t.equal(await usersWith(app, 'second@example.com'), 0, 'nothing created')
  for (const bad of ['has space', 'x'.repeat(256), 'naïve']) {
    assertProblem(t, await signUp(app, bad, 'bad@example.com'), 400, 'VALIDATION_FAILED', `key ${JSON.stringify(bad.slice(0, 12))}`)
  }
  t.equal(await usersWith(app, 'bad@example.com'), 0)
})

t.test('twenty requests at once with one key: one creation; the others replay it or are told it is running', async (t) => {
  const app = await build(t)
  const answers = await Promise.all(Array.from({ length: 20 }, () => signUp(app, 'burst-key', 'burst@example.com')))
  const statuses = answers.map((r) => r.statusCode)
  t.equal(await usersWith(app, 'burst@example.com'), 1, 'exactly one user created')
  t.equal(await mailsTo(app, 'burst@example.com'), 1, 'exactly one mail')
  t.ok(statuses.every((s) => s === 201 || s === 409), `201 or 409 only (${[...new Set(statuses)].join(', ')})`)
  for (const res of answers.filter((r) => r.statusCode === 409)) t.equal(res.json().code, 'IDEMPOTENCY_KEY_IN_USE')
  const created = answers.filter((r) => r.statusCode === 201)
  t.ok(created.length >= 1)
  t.ok(created.every((r) => r.body === created[0]!.body), 'every 201 is the same answer')
  const later = await signUp(app, 'burst-key', 'burst@example.com')
  t.equal(later.statusCode, 201, 'a retry once it has answered gets the answer')
  t.equal(later.body, created[0]!.body)
})

t.test('an answer finished after its user\'s deletion committed is not kept: the key is freed', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { email: 'gone@example.com' })
  const keys = app.idempotencyKeys
  const [hash, seal] = [keys.keyHash(`u${user.id}`, 'late-1'), keys.seal(`u${user.id}`, 'late-1')]
  t.same(await keys.begin(hash, keys.requestHash('PUT', `/users/${user.id}`, { name: 'Late' }), seal), { run: true })
  // The request's own write committed; the deletion commits before its answer is kept.
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: user.headers })).statusCode, 204)
  await keys.finish(hash, seal, {
    status: 200, contentType: 'application/json; charset=utf-8', location: null, etag: '"2"',
    body: JSON.stringify({ id: user.id, href: `/users/${user.id}`, name: 'Late' })
  })
  t.same(await app.db.selectFrom('idempotency_keys').select('id').where('key_hash', '=', hash).execute(), [], 'nothing of the user is kept')
  t.same(await keys.begin(hash, keys.requestHash('PUT', `/users/${user.id}`, { name: 'Late' }), seal), { run: true }, 'a retry runs again')
})

t.test('text a client wrote is never taken for the user an answer presents', async (t) => {
  // A public address for the webhook's host, without a DNS server.
  const app = await build(t, { webhooks: { resolve: async () => [{ address: '93.184.216.34', family: 4 }] } })
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'named@example.com' })
  const hook = () => app.inject({
    method: 'POST', url: '/webhooks', headers: { ...admin.headers, 'idempotency-key': 'hook-1' },
    payload: { url: `https://hooks.example/users/${user.id}`, events: ['user.*'], enabled: false, description: `/users/${user.id}` }
  })
  const first = await hook()
  t.equal(first.statusCode, 201, first.body)
  t.same((await app.db.selectFrom('idempotency_keys').select('user_id').execute()).map((k) => k.user_id), [null], 'the webhook\'s answer presents nobody')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: admin.headers })).statusCode, 204)
  const again = await hook()
  t.equal(again.headers['idempotent-replayed'], 'true', 'the user\'s deletion leaves it kept: the retry is a replay')
  t.equal(again.body, first.body, 'and creates no second webhook')
})

t.test('4xx answers are kept; keys are the caller\'s own; anonymous keys are the key alone', async (t) => {
  const app = await build(t, { env: { MAX_EMAILS_PER_USER: '1' } })
  const alice = await newUser(app)
  const bob = await newUser(app)
  const add = (user: typeof alice, address: string) => app.inject({
    method: 'POST', url: `/users/${user.id}/emails`, headers: { ...user.headers, 'idempotency-key': 'shared-key' }, payload: { address }
  })
  const refused = await add(alice, 'extra@example.com')
  assertProblem(t, refused, 409, 'EMAIL_LIMIT')
  const replayed = await add(alice, 'extra@example.com')
  t.equal(replayed.statusCode, 409, 'the 409 is answered again')
  t.equal(replayed.headers['idempotent-replayed'], 'true')
  t.equal(replayed.headers['content-type'], 'application/problem+json; charset=utf-8')

  const bobs = await add(bob, 'extra@example.com')
  t.notOk(bobs.headers['idempotent-replayed'], 'the same key from another user is another key')

  const anonymous = await signUp(app, 'anon-key', 'anon@example.com', { remoteAddress: '10.0.0.1' })
  const fromElsewhere = await signUp(app, 'anon-key', 'anon@example.com', { remoteAddress: '10.0.0.2' })
  t.equal(fromElsewhere.headers['idempotent-replayed'], 'true', 'an anonymous key is scoped by the key alone')
  t.equal(fromElsewhere.body, anonymous.body)
})

t.test('a 5xx is not kept (a retry runs again); a key left running by a request that died is taken over', async (t) => {
  let failures = 1
  let runs = 0
  const app = await build(t, {
    extend: (app) => {
      app.post('/test/flaky', { config: { auth: 'public', idempotent: true }, schema: { body: { type: 'object', properties: { a: { type: 'number' } } } } }, async (_request, reply) => {
        runs++
        if (failures-- > 0) throw new Error('boom')
        return reply.code(201).send({ runs })
      })
    }
  })
  const post = () => app.inject({ method: 'POST', url: '/test/flaky', headers: { 'idempotency-key': 'flaky' }, payload: { a: 1 } })
  t.equal((await post()).statusCode, 500)
  const second = await post()
  t.equal(second.statusCode, 201, 'the retry ran again')
  t.equal((await post()).body, second.body, 'and its answer is kept')
  t.equal(runs, 2)

  await app.db.updateTable('idempotency_keys').set({ state: 'running', created_at: Date.now() - 61_000 }).execute()
  const takeover = await post()
  t.equal(takeover.statusCode, 201, 'an abandoned key runs again')
  t.equal(runs, 3)

  await app.db.updateTable('idempotency_keys').set({ expires_at: Date.now() - 1 }).execute()
  const expired = await app.inject({ method: 'POST', url: '/test/flaky', headers: { 'idempotency-key': 'flaky' }, payload: { a: 2 } })
  t.equal(expired.statusCode, 201, 'an expired key is free for any request')
  t.equal(runs, 4)
})

t.test('expired keys are purged in batches; a key still kept stays and still replays', async (t) => {
  const app = await build(t)
  for (let i = 0; i < 5; i++) t.equal((await signUp(app, `b7c6a1e2-0000-4000-8000-00000000000${i}`, `gone-${i}@example.com`)).statusCode, 201)
  const kept = await signUp(app, 'b7c6a1e2-0000-4000-8000-0000000000f1', 'kept@example.com')
  const keys = async () => Number((await app.db.selectFrom('idempotency_keys').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  t.equal(await keys(), 6)
  const last = (await app.db.selectFrom('idempotency_keys').select('id').orderBy('id', 'desc').executeTakeFirstOrThrow()).id
  // Five answers past their 24 hours; the last key still kept.
  await app.db.updateTable('idempotency_keys').set({ expires_at: Date.now() - 1 }).where('id', '!=', last).execute()
  t.equal(await app.idempotencyKeys.purge(2), 5, 'batches of two took all five')
  t.equal(await keys(), 1)
  const again = await signUp(app, 'b7c6a1e2-0000-4000-8000-0000000000f1', 'kept@example.com')
  t.equal(again.headers['idempotent-replayed'], 'true', 'the key still kept answers its first answer again')
  t.equal(again.body, kept.body)
})

t.test('expired keys are purged in the background, every PURGE_INTERVAL_SECONDS, by no request', async (t) => {
  const app = await build(t, { env: { PURGE_INTERVAL_SECONDS: '1' } })
  for (const turn of [1, 2]) {
    for (let i = 0; i < 3; i++) t.equal((await signUp(app, `b7c6a1e2-0000-4000-8000-0000000${turn}000${i}`, `later-${turn}-${i}@example.com`)).statusCode, 201)
    await app.db.updateTable('idempotency_keys').set({ expires_at: Date.now() - 1 }).execute()
    const deadline = Date.now() + 15_000
    let left = -1
    while ((left = Number((await app.db.selectFrom('idempotency_keys').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)) > 0 &&
      Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
    t.equal(left, 0, `turn ${turn}: the expired keys are gone`)
  }
})

t.test('the migration gives the answers kept before it the user their Location names', async (t) => {
  const { db, migrateTo } = await migratingDatabase(t)
  await migrateTo('0016_privacy')
  const now = Date.now()
  for (const [key, location] of [['a', '/users/7'], ['b', 'https://roster.example/users/8/emails/3'], ['c', null], ['d', '/webhooks/2']] as const) {
    await sql`insert into idempotency_keys (key_hash, request_hash, state, status, content_type, location, etag, body, created_at, expires_at)
      values (${key}, 'r', 'done', 201, 'application/json', ${location}, null, 'sealed', ${now}, ${now + 60_000})`.execute(db)
  }
  await migrateTo('0017_idempotency_user')
  const rows = await sql<{ key_hash: string; user_id: number | null }>`select key_hash, user_id from idempotency_keys order by key_hash`.execute(db)
  t.same(rows.rows.map((r) => [r.key_hash, r.user_id === null ? null : Number(r.user_id)]), [['a', 7], ['b', 8], ['c', null], ['d', null]])
})
