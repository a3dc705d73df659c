import { sql } from 'kysely'
import t from 'tap'
import type { App } from '../../src/app.js'
import { deleteSessions } from '../../src/accounts/sessions.js'
import { purgeExpired } from '../../src/sessions/purge.js'
import { lockForSession } from '../../src/sessions/repository.js'
import { adminUser, assertProblem, bearer, build, ENGINE, newUser, session, type TestUser } from '../helpers.js'

const refresh = (app: App, refreshToken: string) =>
  app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'refresh_token', refresh_token: refreshToken } })
const works = async (app: App, user: { id: number }, token: string) =>
  (await app.inject({ url: `/users/${user.id}`, headers: bearer(token) })).statusCode === 200
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('a login answers a session: a short access token and a refresh token', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const res = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password }, headers: { 'user-agent': 'RosterApp/1.0 (iPhone)' } })
  t.equal(res.statusCode, 201)
  const body = res.json()
  t.equal(body.token_type, 'Bearer')
  t.ok(body.expires_in > 890 && body.expires_in <= 900, `expires_in ${body.expires_in}: ACCESS_TOKEN_TTL_SECONDS`)
  t.ok(Buffer.from(body.refresh_token, 'base64url').length >= 32, 'a refresh token of 256 random bits')
  t.ok(Date.parse(body.refresh_expires_at) - Date.now() > 29 * 86_400_000, 'the refresh token lives REFRESH_TOKEN_TTL_SECONDS')
  t.match(body.session, { href: `/users/${user.id}/sessions/${body.session.id}`, client: 'RosterApp/1.0 (iPhone)', current: true })
  const stored = await app.db.selectFrom('refresh_tokens').select('token_hash').execute()
  t.notOk(stored.some((r) => r.token_hash === body.refresh_token), 'only a hash of the refresh token is stored')
})

t.test('refresh rotates the pair; a spent refresh token presented again ends the whole session', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const first = await refresh(app, user.refreshToken)
  t.equal(first.statusCode, 201)
  const pair = first.json()
  t.equal(pair.session.id, user.sessionId, 'the same session')
  t.not(pair.refresh_token, user.refreshToken, 'a new refresh token')
  t.ok(await works(app, user, pair.token), 'the new access token works')

  const replay = await refresh(app, user.refreshToken)
  assertProblem(t, replay, 401, 'REFRESH_TOKEN_REUSED', 'the spent one again')
  assertProblem(t, await refresh(app, pair.refresh_token), 401, 'INVALID_GRANT', 'the newest refresh token died with its session')
  t.notOk(await works(app, user, pair.token), 'the new access token died with its session')
  t.notOk(await works(app, user, user.token), 'the first access token too')
  t.equal((await app.db.selectFrom('sessions').select('id').where('user_id', '=', user.id).execute()).length, 0, 'no session left')
})

t.test('a refresh spends its token and renews its session together; an expired token renews nothing', async (t) => {
  // On MySQL one connection for transactions, so that its session's counters are the refresh's: read in one too.
  const app = await build(t, ENGINE === 'mysql' ? { env: { DB_POOL_SIZE: '1' } } : {})
  const user = await newUser(app)
  const multiTableUpdates = () => app.db.transaction().execute(async (trx) =>
    Number((await sql<{ Value: string }>`show session status like 'Com_update_multi'`.execute(trx)).rows[0]?.Value))
  const sessionRow = () => app.db.selectFrom('sessions').select(['last_used_at', 'expires_at']).where('id', '=', user.sessionId).executeTakeFirstOrThrow()
  const tokenRow = (id: number) => app.db.selectFrom('refresh_tokens').select(['used_at', 'expires_at']).where('id', '=', id).executeTakeFirstOrThrow()
  const tokenIds = async () => (await app.db.selectFrom('refresh_tokens').select('id').where('session_id', '=', user.sessionId).orderBy('id').execute()).map((r) => r.id)
  // Both ends of the session's life pushed back, so that a renewal shows.
  const past = Date.now() - 60_000
  await app.db.updateTable('sessions').set({ last_used_at: past, expires_at: Date.now() + 60_000 }).where('id', '=', user.sessionId).execute()
  const [first] = await tokenIds()
  const updatesBefore = ENGINE === 'mysql' ? await multiTableUpdates() : 0
  const renewed = await refresh(app, user.refreshToken)
  t.equal(renewed.statusCode, 201, renewed.body)
  if (ENGINE === 'mysql') t.equal((await multiTableUpdates()) - updatesBefore, 1, 'spent and renewed by one statement')
  const after = await sessionRow()
  t.ok(after.last_used_at > past, 'used now')
  t.ok(after.expires_at > Date.now() + 29 * 86_400_000, 'alive for REFRESH_TOKEN_TTL_SECONDS again')
  t.not((await tokenRow(first!)).used_at, null, 'the token presented is spent')

  // The new refresh token, expired: it is spent and refused, and its session is left as it was.
  const [, second] = await tokenIds()
  await app.db.updateTable('refresh_tokens').set({ expires_at: Date.now() - 1 }).where('id', '=', second!).execute()
  assertProblem(t, await refresh(app, renewed.json().refresh_token), 401, 'INVALID_GRANT', 'an expired refresh token')
  t.same(await sessionRow(), after, 'the session was not renewed')
  t.not((await tokenRow(second!)).used_at, null, 'the expired token is spent')
})

t.test('bad refresh tokens: INVALID_GRANT, never a 400 with details or a 500', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  for (const bad of ['x', 'A'.repeat(43), user.refreshToken + 'A', user.refreshToken.slice(1), '../../etc', user.token]) {
    assertProblem(t, await refresh(app, bad), 401, 'INVALID_GRANT', `refresh_token ${bad.slice(0, 12)}…`)
  }
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'refresh_token' } }), 400, 'VALIDATION_FAILED', 'no refresh_token')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'password', email: user.email } }), 400, 'VALIDATION_FAILED', 'no password')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'magic', email: user.email, password: 'x' } }), 400, 'VALIDATION_FAILED', 'an unknown grant')
  t.equal((await refresh(app, user.refreshToken)).statusCode, 201, 'the real one still works')
})

t.test('lifetimes: access tokens, refresh tokens and sessions each end on time', async (t) => {
  const app = await build(t, { env: { ACCESS_TOKEN_TTL_SECONDS: '1', REFRESH_TOKEN_TTL_SECONDS: '2', SESSION_MAX_AGE_SECONDS: '4' } })
  const user = await newUser(app)
  await sleep(1100)
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: user.headers }), 401, 'UNAUTHENTICATED', 'the access token expired')
  const second = await refresh(app, user.refreshToken)
  t.equal(second.statusCode, 201, 'the refresh token still works after the access token expired')
  await sleep(1500)
  const third = await refresh(app, second.json().refresh_token)
  t.equal(third.statusCode, 201, 'each refresh renews the session')
  await sleep(1600)
  assertProblem(t, await refresh(app, third.json().refresh_token), 401, 'INVALID_GRANT', 'refreshed on time, but past SESSION_MAX_AGE_SECONDS')

  const idle = await newUser(app)
  await sleep(2100)
  assertProblem(t, await refresh(app, idle.refreshToken), 401, 'INVALID_GRANT', 'not refreshed within REFRESH_TOKEN_TTL_SECONDS')
})

t.test('TOKEN_TTL_SECONDS stays accepted as the old name of ACCESS_TOKEN_TTL_SECONDS', async (t) => {
  const app = await build(t, { env: { TOKEN_TTL_SECONDS: '3600' } })
  const user = await newUser(app)
  const body = (await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password } })).json()
  t.ok(body.expires_in > 3590 && body.expires_in <= 3600, `expires_in ${body.expires_in}`)
})

t.test('listing sessions, ending one, ending all, logging out', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const phone = await session(app, user.email, user.password, { headers: { 'user-agent': 'phone' } })
  const laptop = await session(app, user.email, user.password, { headers: { 'user-agent': 'laptop' } })

  const listed = await app.inject({ url: `/users/${user.id}/sessions`, headers: bearer(phone.token) })
  t.equal(listed.statusCode, 200)
  const items = listed.json().items as Array<{ id: number; client: string; current: boolean; href: string }>
  t.equal(items.length, 3)
  t.same(items.filter((s) => s.current).map((s) => s.id), [phone.session.id], 'current marks the caller\'s own')
  t.ok(items.every((s) => s.href === `/users/${user.id}/sessions/${s.id}`))
  t.equal((await app.inject({ url: `/users/${user.id}/sessions`, headers: admin.headers })).json().items.length, 3, 'an admin sees them')
  const other = await newUser(app)
  assertProblem(t, await app.inject({ url: `/users/${user.id}/sessions`, headers: other.headers }), 401, 'FORBIDDEN', 'another user does not')

  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/sessions/${laptop.session.id}`, headers: bearer(phone.token) })).statusCode, 204)
  t.notOk(await works(app, user, laptop.token), 'the ended session\'s access token stops at once')
  assertProblem(t, await refresh(app, laptop.refresh_token), 401, 'INVALID_GRANT', 'and its refresh token')
  t.ok(await works(app, user, phone.token), 'the others go on')
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${user.id}/sessions/${laptop.session.id}`, headers: bearer(phone.token) }), 404, 'SESSION_NOT_FOUND')
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${user.id}/sessions/${other.sessionId}`, headers: bearer(phone.token) }), 404, 'SESSION_NOT_FOUND', 'another user\'s session is not found under this one')
  t.ok(await works(app, other, other.token), 'and is not ended')

  t.equal((await app.inject({ method: 'DELETE', url: '/auth/tokens/current', headers: user.headers })).statusCode, 204, 'log out')
  t.notOk(await works(app, user, user.token))
  assertProblem(t, await refresh(app, user.refreshToken), 401, 'INVALID_GRANT', 'logging out ends the session, refresh token included')

  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/sessions`, headers: bearer(phone.token) })).statusCode, 204, 'sign out everywhere')
  t.notOk(await works(app, user, phone.token), 'the calling session included')
  t.equal((await app.db.selectFrom('sessions').select('id').where('user_id', '=', user.id).execute()).length, 0)
})

t.test('what ends sessions: a password change ends the others, a reset, a ban, a demotion and a deletion end all', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const twoSessions = async (): Promise<[TestUser, { token: string; refresh_token: string }]> => {
    const user = await newUser(app)
    return [user, await session(app, user.email, user.password)]
  }

  const [self, other] = await twoSessions()
  const changed = await app.inject({ method: 'PUT', url: `/users/${self.id}/password`, headers: self.headers, payload: { password: 'new-password-1', current_password: self.password } })
  t.equal(changed.statusCode, 204)
  t.ok(await works(app, self, self.token), 'a password change keeps the caller\'s session')
  t.equal((await refresh(app, self.refreshToken)).statusCode, 201, 'refresh token included')
  t.notOk(await works(app, self, other.token), 'and ends the others')
  assertProblem(t, await refresh(app, other.refresh_token), 401, 'INVALID_GRANT')

  const [reset, resetOther] = await twoSessions()
  await app.inject({ method: 'PUT', url: `/users/${reset.id}/password`, headers: admin.headers, payload: { password: 'reset-password-1' } })
  t.notOk(await works(app, reset, reset.token) || await works(app, reset, resetOther.token), 'an admin\'s reset ends them all')

  const [banned, bannedOther] = await twoSessions()
  await app.inject({ method: 'PUT', url: `/users/${banned.id}/status`, headers: admin.headers, payload: { status: 'BANNED' } })
  await app.inject({ method: 'PUT', url: `/users/${banned.id}/status`, headers: admin.headers, payload: { status: 'ACTIVE' } })
  t.notOk(await works(app, banned, banned.token) || await works(app, banned, bannedOther.token), 'a ban ends them all, for good')
  assertProblem(t, await refresh(app, banned.refreshToken), 401, 'INVALID_GRANT', 'reinstatement revives no refresh token')

  const [demoted, demotedOther] = await twoSessions()
  await app.inject({ method: 'PUT', url: `/users/${demoted.id}/role`, headers: admin.headers, payload: { role: 'admin' } })
  t.ok(await works(app, demoted, demoted.token), 'a promotion ends nothing')
  await app.inject({ method: 'PUT', url: `/users/${demoted.id}/role`, headers: admin.headers, payload: { role: 'user' } })
  t.notOk(await works(app, demoted, demoted.token) || await works(app, demoted, demotedOther.token), 'a demotion ends them all')

  const [deleted] = await twoSessions()
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${deleted.id}`, headers: admin.headers })).statusCode, 204)
  t.equal((await app.db.selectFrom('sessions').select('id').where('user_id', '=', deleted.id).execute()).length, 0, 'a deletion ends them all')
  t.equal((await app.db.selectFrom('refresh_tokens').select('id').execute()).length > 0, true, 'other users\' refresh tokens remain')
})

t.test('races: no token issued by a request racing a revocation works once the revocation has answered', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const statuses: number[] = []

  // Logins with the old password racing a password change.
  const a = await newUser(app)
  const logins = Array.from({ length: 12 }, () => app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: a.email, password: a.password }, remoteAddress: `10.1.0.${Math.floor(Math.random() * 200)}` }))
  const change = app.inject({ method: 'PUT', url: `/users/${a.id}/password`, headers: admin.headers, payload: { password: 'changed-password-1' } })
  const [changed, ...raced] = await Promise.all([change, ...logins])
  t.equal(changed.statusCode, 204)
  statuses.push(...raced.map((r) => r.statusCode))
  const minted = raced.filter((r) => r.statusCode === 201).map((r) => r.json().token as string)
  let surviving = 0
  for (const token of minted) if (await works(app, a, token)) surviving++
  t.equal(surviving, 0, `of ${minted.length} tokens minted during a password change, none works after it`)

  // Logins and refreshes racing a ban.
  const b = await newUser(app)
  const bLogins = Array.from({ length: 12 }, (_, i) => i % 3 === 0
    ? refresh(app, b.refreshToken)
    : app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: b.email, password: b.password }, remoteAddress: `10.2.0.${i}` }))
  const [ban, ...bRaced] = await Promise.all([app.inject({ method: 'PUT', url: `/users/${b.id}/status`, headers: admin.headers, payload: { status: 'BANNED' } }), ...bLogins])
  t.equal(ban.statusCode, 200)
  statuses.push(...bRaced.map((r) => r.statusCode))
  await app.inject({ method: 'PUT', url: `/users/${b.id}/status`, headers: admin.headers, payload: { status: 'ACTIVE' } })
  let bSurviving = 0
  for (const r of bRaced.filter((r) => r.statusCode === 201)) if (await works(app, b, r.json().token)) bSurviving++
  t.equal(bSurviving, 0, 'no token minted during a ban works after reinstatement')

  // Logins racing a deletion: 201 or 401, never a 5xx.
  const c = await newUser(app)
  const cLogins = Array.from({ length: 12 }, (_, i) => app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: c.email, password: c.password }, remoteAddress: `10.3.0.${i}` }))
  const [deletion, ...cRaced] = await Promise.all([app.inject({ method: 'DELETE', url: `/users/${c.id}`, headers: admin.headers }), ...cLogins])
  t.equal(deletion.statusCode, 204)
  statuses.push(...cRaced.map((r) => r.statusCode))
  for (const r of cRaced) t.ok(r.statusCode === 201 || r.statusCode === 401, `a login racing a deletion: ${r.statusCode} ${r.statusCode >= 500 ? r.body : ''}`)
  t.equal((await app.db.selectFrom('tokens').select('id').where('user_id', '=', c.id).execute()).length, 0, 'nothing of the deleted user remains')
  t.notOk(statuses.some((s) => s >= 500), `no 5xx in any race (${[...new Set(statuses)].join(', ')})`)
})

t.test('sessions per user are capped: a login past the cap ends the oldest', async (t) => {
  const app = await build(t, { env: { MAX_SESSIONS_PER_USER: '3' } })
  const user = await newUser(app)
  const later = [await session(app, user.email, user.password), await session(app, user.email, user.password), await session(app, user.email, user.password)]
  t.notOk(await works(app, user, user.token), 'the oldest session ended')
  for (const s of later) t.ok(await works(app, user, s.token), 'the three newest go on')
  t.equal((await app.inject({ url: `/users/${user.id}/sessions`, headers: bearer(later[0]!.token) })).json().items.length, 3)
})

t.test('many users logging in at once all get their sessions (no lock conflicts between users)', async (t) => {
  const app = await build(t)
  const users = await Promise.all(Array.from({ length: 25 }, () => newUser(app)))
  const again = await Promise.all(users.map((u, i) => app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: u.email, password: u.password }, remoteAddress: `10.9.0.${i}` })))
  t.same(again.map((r) => r.statusCode), users.map(() => 201), 'every login answered 201')
})

t.test('a sign-in making room and the purge take a session\'s row before its tokens: neither deadlocks the other', { skip: ENGINE !== 'mysql' && 'MySQL only: SQLite has one writer at a time' }, async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  await app.db.updateTable('sessions').set({ expires_at: 1 }).where('user_id', '=', user.id).execute()
  const expired = (await app.db.selectFrom('sessions').select('id').where('user_id', '=', user.id).execute()).map((r) => r.id)
  t.equal(expired.length, 1)
  // A sign-in's transaction, held open: the user locked with its expired session, as a login locks them.
  const trx = await app.db.startTransaction().execute()
  const locked = await lockForSession(trx, user.id)
  t.same(locked?.sessions.map((s) => s.id), expired)
  // The purge meets the locked session and waits for it, holding none of its tokens.
  let purgeEnded = false
  const purge = purgeExpired(app.db, Date.now(), 500).finally(() => { purgeEnded = true })
  await sleep(300)
  t.notOk(purgeEnded, 'the purge waits for the sign-in')
  // The sign-in makes room: the expired session's tokens, then the session. A purge holding those tokens would be
  // a deadlock, and one of the two would be rolled back.
  await deleteSessions(trx, expired)
  await trx.commit().execute()
  await purge
  t.same(await app.db.selectFrom('sessions').select('id').where('user_id', '=', user.id).execute(), [], 'the session is gone, once')
  t.same(await app.db.selectFrom('refresh_tokens').select('id').where('session_id', 'in', expired).execute(), [])
})
