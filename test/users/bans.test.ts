import t from 'tap'
import { adminUser, assertProblem, build, newUser } from '../helpers.js'

const signIn = (app: Awaited<ReturnType<typeof build>>, email: string, password: string) =>
  app.inject({ method: 'POST', url: '/auth/tokens', payload: { email, password } })

t.test('a ban with a reason and an end: shown to admins, its end told at sign-in, lifted by itself', async (t) => {
  const app = await build(t, { bans: { everyMs: 100 } })
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'spammer@example.com' })
  const until = new Date(Date.now() + 1500).toISOString()
  const banned = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'BANNED', reason: 'spam', until } })
  t.equal(banned.statusCode, 200, banned.body)
  t.match(banned.json(), { status: 'BANNED', ban: { reason: 'spam', until, by: { type: 'admin', id: admin.id } } })
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode, 401, 'its sessions ended')
  const refused = await signIn(app, user.email, user.password)
  assertProblem(t, refused, 401, 'USER_BANNED')
  t.equal(refused.json().banned_until, until, 'the answer says until when')
  t.notOk(refused.body.includes('spam'), 'never why')

  // The end comes: nobody asks anything, and the service lifts the ban by itself.
  let events: Array<{ actor: { type: string }; data: { status: string; ban: unknown }; previous: { status: string } }> = []
  for (let i = 0; i < 100 && events.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    events = (await app.db.selectFrom('events').select(['actor_type', 'data', 'previous']).where('type', '=', 'user.status_changed')
      .where('user_id', '=', user.id).where('actor_type', '=', 'system').execute())
      .map((e) => ({ actor: { type: e.actor_type }, data: JSON.parse(e.data) as { status: string; ban: unknown }, previous: JSON.parse(e.previous ?? 'null') as { status: string } }))
  }
  t.equal(events.length, 1, 'one user.status_changed by the system')
  t.match(events[0], { data: { status: 'ACTIVE', ban: null }, previous: { status: 'BANNED', ban: { reason: 'spam' } } })
  t.match((await app.inject({ url: `/users/${user.id}`, headers: admin.headers })).json(), { status: 'ACTIVE', ban: null })
  t.equal((await signIn(app, user.email, user.password)).statusCode, 201, 'it signs in again')
})

t.test('a sign-in at the moment a ban ends works, and lifts the ban itself', async (t) => {
  const app = await build(t, { bans: { everyMs: 60_000 } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  const banned = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'BANNED', until: new Date(Date.now() + 300).toISOString() } })
  const bannedTag = banned.headers.etag as string
  assertProblem(t, await signIn(app, user.email, user.password), 401, 'USER_BANNED')
  await new Promise((resolve) => setTimeout(resolve, 400))
  const url = `/users/${user.id}`
  const shown = await app.inject({ url, headers: { ...admin.headers, 'if-none-match': bannedTag } })
  t.equal(shown.statusCode, 200, 'the tag that showed it banned is not current')
  t.match(shown.json(), { status: 'ACTIVE', ban: null }, 'shown as lifted at once')
  const endedTag = shown.headers.etag as string
  t.equal(endedTag, bannedTag.replace(/"$/, '-ended"'), 'the same version, shown lifted')
  t.equal((await app.inject({ url, headers: { ...admin.headers, 'if-none-match': endedTag } })).statusCode, 304)
  const back = await signIn(app, user.email, user.password)
  t.equal(back.statusCode, 201, back.body)
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: { authorization: `Bearer ${back.json().token}` } })).statusCode, 200, 'its token works')
  const lifts = await app.db.selectFrom('events').select('actor_type').where('type', '=', 'user.status_changed').where('user_id', '=', user.id).execute()
  t.same(lifts.map((e) => e.actor_type), ['admin', 'system'], 'the lift written once, by the system')
  const rename = (tag: string) => app.inject({ method: 'PUT', url: `${url}/name`, headers: { ...admin.headers, 'if-match': tag }, payload: { name: 'Renamed' } })
  assertProblem(t, await rename(endedTag), 412, 'PRECONDITION_FAILED', 'the lift is a new version')
  const lifted = await app.inject({ url, headers: admin.headers })
  t.notMatch(lifted.headers.etag, /-ended/)
  t.equal((await rename(lifted.headers.etag as string)).statusCode, 200)
})

t.test('a write with the tag of a ban that has ended but is not lifted yet checks the version it was read at', async (t) => {
  const app = await build(t, { bans: { everyMs: 60_000 } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  const url = `/users/${user.id}`
  await app.inject({ method: 'PUT', url: `${url}/status`, headers: admin.headers, payload: { status: 'BANNED', until: new Date(Date.now() + 200).toISOString() } })
  await new Promise((resolve) => setTimeout(resolve, 300))
  const shown = await app.inject({ url, headers: admin.headers })
  t.match(shown.headers.etag, /^"v\d+-ended"$/)
  const renamed = await app.inject({ method: 'PUT', url: `${url}/name`, headers: { ...admin.headers, 'if-match': shown.headers.etag as string }, payload: { name: 'Renamed' } })
  t.equal(renamed.statusCode, 200, renamed.body)
  t.match(renamed.json(), { name: 'Renamed', status: 'ACTIVE' })
  t.match(renamed.headers.etag, /^"v\d+-ended"$/, 'still shown lifted, at its new version')
  t.not(renamed.headers.etag, shown.headers.etag)
})

t.test('a ban without an end, its lifting, and what a status change refuses', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const put = (payload: Record<string, unknown>) => app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload })
  assertProblem(t, await put({ status: 'BANNED', until: new Date(Date.now() - 1000).toISOString() }), 400, 'VALIDATION_FAILED', 'an end in the past')
  assertProblem(t, await put({ status: 'BANNED', reason: 'x'.repeat(501) }), 400, 'VALIDATION_FAILED', 'a reason too long')
  // The longest reason in JSON's longest escapes (a surrogate pair a character, as an ASCII-only encoder writes it).
  const escaped = JSON.stringify({ status: 'BANNED', reason: '😀'.repeat(500) }).replace(/[\ud800-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`)
  const longest = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: { ...admin.headers, 'content-type': 'application/json' }, payload: escaped })
  t.equal(longest.statusCode, 200, `a reason of 500 characters, ${escaped.length} bytes escaped`)
  t.equal(longest.json().ban.reason, '😀'.repeat(500))
  assertProblem(t, await put({ status: 'ACTIVE', reason: 'why' }), 400, 'VALIDATION_FAILED', 'a reason without a ban')
  assertProblem(t, await put({ status: 'BANNED', until: 'tomorrow' }), 400, 'VALIDATION_FAILED')
  t.match((await put({ status: 'BANNED' })).json(), { status: 'BANNED', ban: { reason: null, until: null } })
  const refused = await signIn(app, user.email, user.password)
  assertProblem(t, refused, 401, 'USER_BANNED')
  t.notOk('banned_until' in refused.json(), 'no end, none told')
  t.match((await put({ status: 'ACTIVE' })).json(), { status: 'ACTIVE', ban: null })
  t.equal((await signIn(app, user.email, user.password)).statusCode, 201)
  const bare = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: { ...admin.headers, 'content-type': 'text/plain' }, payload: 'BANNED' })
  t.match(bare.json(), { status: 'BANNED', ban: { reason: null } }, 'the bare value still bans')
  t.match((await app.inject({ url: '/users?status=BANNED', headers: admin.headers })).json().items, [{ id: user.id, ban: { reason: null } }])
})
