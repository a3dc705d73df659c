import { createHash } from 'node:crypto'
import t from 'tap'
import { adminUser, assertProblem, bearer, build, form, login, markVerified, multipart, newUser, session } from '../helpers.js'

/** A problem body without its request's id, which differs from request to request by design. */
const anonymous = (body: Record<string, unknown>) => ({ ...body, request_id: undefined })

t.test('POST /auth/tokens issues a bearer token in every encoding', async (t) => {
  const app = await build(t, { env: { TOKEN_TTL_SECONDS: '3600' } })
  const user = await newUser(app, { email: 'Ada@Example.com', password: 'correct-horse' })

  const json = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'ada@example.com', password: 'correct-horse' } })
  t.equal(json.statusCode, 201)
  t.equal(json.headers['cache-control'], 'no-store')
  const body = json.json()
  t.equal(body.token_type, 'Bearer')
  t.ok(Buffer.from(body.token, 'base64url').length >= 16, 'at least 128 random bits')
  const ttl = Date.parse(body.expires_at) - Date.now()
  t.ok(ttl > 3500_000 && ttl <= 3600_000, 'expires after TOKEN_TTL_SECONDS')
  t.equal(body.user.id, user.id)
  t.equal(body.user.href, `/users/${user.id}`)

  const stored = await app.db.selectFrom('tokens').select('token_hash').execute()
  t.notOk(stored.some((r) => r.token_hash === body.token), 'the token itself is not stored')
  t.ok(stored.some((r) => r.token_hash === createHash('sha256').update(body.token).digest('hex')), 'its SHA-256 is')

  const viaForm = await app.inject({ method: 'POST', url: '/auth/tokens', ...form({ email: 'ADA@example.com', password: 'correct-horse' }) })
  t.equal(viaForm.statusCode, 201, 'form')
  const viaMultipart = await app.inject({ method: 'POST', url: '/auth/tokens', ...multipart({ email: 'ada@example.com', password: 'correct-horse' }) })
  t.equal(viaMultipart.statusCode, 201, 'multipart')

  const me = await app.inject({ url: `/users/${user.id}`, headers: bearer(viaMultipart.json().token) })
  t.equal(me.statusCode, 200, 'the token works')
})

t.test('wrong password and unknown address answer alike', async (t) => {
  const app = await build(t)
  await newUser(app, { email: 'known@example.com', password: 'right-password' })
  const wrong = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'known@example.com', password: 'wrong-password' } })
  const unknown = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'nobody@example.com', password: 'wrong-password' } })
  assertProblem(t, wrong, 401, 'INVALID_CREDENTIALS')
  assertProblem(t, unknown, 401, 'INVALID_CREDENTIALS')
  t.same(anonymous(wrong.json()), anonymous(unknown.json()), 'same body, but for the request\'s own id')
  t.equal(wrong.headers['www-authenticate'], 'Bearer realm="api"')
  t.equal(unknown.headers['www-authenticate'], 'Bearer realm="api"')
})

t.test('a user logs in with its primary address or a verified one; an unverified secondary answers like a wrong password', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { password: 'pass-word-1' })
  t.ok(await login(app, user.email.toUpperCase(), 'pass-word-1'), 'the primary, unverified')
  await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'Second@Example.com' } })
  const unverified = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'second@example.COM', password: 'pass-word-1' } })
  const wrong = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'wrong-password' } })
  assertProblem(t, unverified, 401, 'INVALID_CREDENTIALS', 'the unverified secondary address')
  t.same(anonymous(unverified.json()), anonymous(wrong.json()), 'the same answer as a wrong password')
  // test/verification/flows.test.ts verifies addresses through real mail; here only the login rule is at stake.
  await markVerified(app, 'second@example.com')
  t.ok(await login(app, 'second@example.COM', 'pass-word-1'), 'the secondary, once verified')
})

t.test('a banned user gets no token and its tokens die at once', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'ban@example.com', password: 'pass-word-1' })
  const second = await login(app, 'ban@example.com', 'pass-word-1')

  const ban = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'BANNED' } })
  t.equal(ban.statusCode, 200)
  t.equal(ban.json().status, 'BANNED')

  for (const token of [user.token, second]) {
    const res = await app.inject({ url: `/users/${user.id}`, headers: bearer(token) })
    assertProblem(t, res, 401, 'UNAUTHENTICATED', 'banned token')
  }
  const wrong = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'ban@example.com', password: 'not-it-at-all' } })
  assertProblem(t, wrong, 401, 'INVALID_CREDENTIALS', 'banned, wrong password: nothing revealed')
  const right = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'ban@example.com', password: 'pass-word-1' } })
  assertProblem(t, right, 401, 'USER_BANNED', 'banned, right password')

  await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'ACTIVE' } })
  const revived = await app.inject({ url: `/users/${user.id}`, headers: user.headers })
  assertProblem(t, revived, 401, 'UNAUTHENTICATED', 'reinstating does not revive old tokens')
  t.ok(await login(app, 'ban@example.com', 'pass-word-1'), 'a reinstated user logs in again')
})

t.test('DELETE /auth/tokens/current revokes only the calling token', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const other = await login(app, user.email, user.password)
  const out = await app.inject({ method: 'DELETE', url: '/auth/tokens/current', headers: user.headers })
  t.equal(out.statusCode, 204)
  t.equal(out.body, '')
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: user.headers }), 401, 'UNAUTHENTICATED', 'revoked')
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: bearer(other) })).statusCode, 200, 'the other token lives')
  assertProblem(t, await app.inject({ method: 'DELETE', url: '/auth/tokens/current' }), 401, 'UNAUTHENTICATED', 'anonymous')
  // A client that sends every request as multipart (a form library) logs out as well: the route takes that body.
  const third = await login(app, user.email, user.password)
  const body = multipart({ reason: 'done' })
  const viaMultipart = await app.inject({ method: 'DELETE', url: '/auth/tokens/current', payload: body.payload, headers: { ...body.headers, ...bearer(third) } })
  t.equal(viaMultipart.statusCode, 204, 'a multipart body is taken, as by every DELETE')
})

t.test('expired and malformed tokens are refused', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  await app.db.updateTable('tokens').set({ expires_at: Date.now() - 1 }).execute()
  const expired = await app.inject({ url: `/users/${user.id}`, headers: user.headers })
  assertProblem(t, expired, 401, 'UNAUTHENTICATED', 'expired')
  t.equal(expired.headers['www-authenticate'], 'Bearer realm="api"')
  for (const authorization of ['Basic abc', 'Bearer', 'Bearer a b', `Token ${user.token}`]) {
    assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: { authorization } }), 401, 'UNAUTHENTICATED', authorization)
  }
})

t.test('expired sessions and tokens are purged in the background, in batches; a spent refresh token is kept until it expires', async (t) => {
  const app = await build(t, { purge: { everyMs: 50, batch: 2 } })
  const user = await newUser(app)
  const other = await newUser(app)
  const spent = await session(app, user.email, user.password)
  const renewed = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'refresh_token', refresh_token: spent.refresh_token } })
  t.equal(renewed.statusCode, 201, renewed.body)
  // Every access token of both users has expired, and one of `other`'s sessions.
  await app.db.updateTable('tokens').set({ expires_at: Date.now() - 1 }).execute()
  await app.db.updateTable('sessions').set({ expires_at: Date.now() - 1 }).where('user_id', '=', other.id).execute()
  const left = async () => ({
    tokens: Number((await app.db.selectFrom('tokens').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n),
    sessions: (await app.db.selectFrom('sessions').select('id').where('user_id', '=', other.id).execute()).length
  })
  let now = await left()
  for (let i = 0; i < 100 && (now.tokens > 0 || now.sessions > 0); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    now = await left()
  }
  t.equal(now.tokens, 0, 'every expired access token is gone, by no request')
  t.equal(now.sessions, 0, 'the expired session went with its tokens')
  const replay = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'refresh_token', refresh_token: spent.refresh_token } })
  assertProblem(t, replay, 401, 'REFRESH_TOKEN_REUSED', 'the spent refresh token is still known: its replay ends the session')
})

t.test('a route that declares no authorization rule cannot be registered', async (t) => {
  await t.rejects(build(t, {
    extend: (app) => {
      app.get('/undeclared', async () => ({ ok: true }))
    }
  }), /must declare config\.auth/)
})

t.test('sign-up', async (t) => {
  t.test('open sign-up creates plain users; role and status need an admin', async (t) => {
    const app = await build(t)
    const admin = await adminUser(app)
    const res = await app.inject({ method: 'POST', url: '/users', payload: { name: '  Grace Hopper ', email: 'Grace@Example.com', password: 'password-1' } })
    t.equal(res.statusCode, 201)
    const user = res.json()
    t.equal(res.headers.location, user.href)
    t.match(user, { name: 'Grace Hopper', email: 'Grace@Example.com', role: 'user', status: 'ACTIVE' })
    t.match(user.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)

    const escalate = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Mallory', email: 'm@example.com', password: 'password-1', role: 'admin' } })
    assertProblem(t, escalate, 401, 'UNAUTHENTICATED', 'anonymous role')
    const plain = await newUser(app)
    const byPlain = await app.inject({ method: 'POST', url: '/users', headers: plain.headers, payload: { name: 'Mallory', email: 'm@example.com', password: 'password-1', status: 'BANNED' } })
    assertProblem(t, byPlain, 401, 'FORBIDDEN', 'plain user sets status')
    t.match(byPlain.headers['www-authenticate'], /error="insufficient_scope"/)
    const byAdmin = await app.inject({ method: 'POST', url: '/users', headers: admin.headers, payload: { name: 'Root 2', email: 'r2@example.com', password: 'password-1', role: 'admin' } })
    t.equal(byAdmin.statusCode, 201)
    t.equal(byAdmin.json().role, 'admin')
    const mallory = await app.db.selectFrom('emails').select('id').where('address_norm', '=', 'm@example.com').execute()
    t.equal(mallory.length, 0, 'refused sign-ups wrote nothing')
  })

  t.test('an address taken in any case is a 409 that writes nothing', async (t) => {
    const app = await build(t)
    await newUser(app, { email: 'taken@example.com' })
    const before = await app.db.selectFrom('users').select('id').execute()
    const dup = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Dup', email: 'TAKEN@example.com', password: 'password-1' } })
    assertProblem(t, dup, 409, 'EMAIL_TAKEN')
    const after = await app.db.selectFrom('users').select('id').execute()
    t.equal(after.length, before.length, 'no user row left behind')
  })

  t.test('closed sign-up: only an admin creates users', async (t) => {
    const app = await build(t, { env: { SIGNUP_OPEN: 'false' } })
    const admin = await adminUser(app)
    const payload = { name: 'New', email: 'new@example.com', password: 'password-1' }
    assertProblem(t, await app.inject({ method: 'POST', url: '/users', payload }), 401, 'UNAUTHENTICATED')
    const created = await app.inject({ method: 'POST', url: '/users', headers: admin.headers, payload })
    t.equal(created.statusCode, 201)
    const plainToken = await login(app, 'new@example.com', 'password-1')
    const byPlain = await app.inject({ method: 'POST', url: '/users', headers: bearer(plainToken), payload: { ...payload, email: 'x@example.com' } })
    assertProblem(t, byPlain, 401, 'FORBIDDEN')
  })
})

t.test('the caller lookup never sees an uncommitted revocation', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const trx = await app.db.startTransaction().execute()
  await trx.deleteFrom('tokens').where('user_id', '=', user.id).execute()
  // Asked while the revocation is open: SQLite waits for it to end, MySQL reads the committed row.
  const during = app.inject({ url: `/users/${user.id}`, headers: user.headers })
  await new Promise((resolve) => setTimeout(resolve, 50))
  await trx.rollback().execute()
  t.equal((await during).statusCode, 200, 'the token stands: its revocation never committed')
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode, 200, 'and after the rollback')
})
