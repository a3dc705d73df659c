import { hash as bcrypt } from '@node-rs/bcrypt'
import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, multipart, newUser, type TestUser } from '../helpers.js'

const FAST = { imports: { pollMs: 20, batch: 7 } }

interface ImportBody {
  id: number; status: string; dry_run: boolean; lines: number; processed: number; created: number; updated: number; skipped: number; failed: number
  detail: string | null; errors: string
}

async function upload(app: App, admin: TestUser, body: string | Buffer, query = '', type = 'application/x-ndjson') {
  return app.inject({ method: 'POST', url: `/imports${query}`, headers: { ...admin.headers, 'content-type': type }, payload: body })
}

/** Polls the import until it has ended. */
async function finished(app: App, admin: TestUser, id: number): Promise<ImportBody> {
  for (let i = 0; i < 500; i++) {
    const res = await app.inject({ method: 'GET', url: `/imports/${id}`, headers: admin.headers })
    const body = res.json<ImportBody>()
    if (body.status === 'succeeded' || body.status === 'failed') return body
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`import ${id} did not end`)
}

async function imported(app: App, admin: TestUser, body: string | Buffer, query = '', type?: string): Promise<ImportBody> {
  const res = await upload(app, admin, body, query, type)
  if (res.statusCode !== 202) throw new Error(`${res.statusCode} ${res.body}`)
  t.equal(res.headers.location, `/imports/${res.json<ImportBody>().id}`)
  return finished(app, admin, res.json<ImportBody>().id)
}

async function errorsOf(app: App, admin: TestUser, id: number) {
  const res = await app.inject({ method: 'GET', url: `/imports/${id}/errors?limit=200`, headers: admin.headers })
  return res.json<{ items: Array<{ line: number; code: string; detail: string; email: string | null; external_id: string | null }> }>().items
}

async function userByEmail(app: App, admin: TestUser, email: string) {
  const res = await app.inject({ method: 'GET', url: `/users?email=${encodeURIComponent(email)}`, headers: admin.headers })
  return res.json<{ items: Array<{ id: number; name: string; email: string; status: string; role: string; created_at: string }> }>().items[0]
}

async function emailsOf(app: App, admin: TestUser, id: number) {
  const res = await app.inject({ method: 'GET', url: `/users/${id}/emails`, headers: admin.headers })
  return res.json<{ items: Array<{ address: string; primary: boolean; verified: boolean }> }>().items.map((e) => [e.address, e.primary, e.verified])
}

const signIn = (app: App, email: string, password: string) =>
  app.inject({ method: 'POST', url: '/auth/tokens', payload: { email, password } })

const ndjson = (...lines: unknown[]) => lines.map((l) => typeof l === 'string' ? l : JSON.stringify(l)).join('\n') + '\n'

t.test('roster NDJSON: users created with their addresses, marks and passwords; bad lines fail alone', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const hashed = await bcrypt('secret-password-1', 4)
  const existing = await newUser(app, { email: 'already@example.com' })
  const file = ndjson(
    { external_id: 'ext-1', name: 'Ada Lovelace', emails: [{ address: 'ada@example.com', verified: true, primary: true }, { address: 'ada@work.example', verified: false }], password_hash: hashed, status: 'ACTIVE', role: 'user', created_at: '2019-03-01T10:00:00Z' },
    { email: 'grace@example.com', email_verified: true },
    { emails: [{ address: 'not an address' }] },
    '{"email": "broken@example.com"',
    '',
    { email: 'already@example.com', name: 'Someone Else' },
    { email: 'hashy@example.com', password_hash: 'md5:nothing-we-know' },
    { email: 'banned@example.com', status: 'BANNED', role: 'admin' }
  )
  const done = await imported(app, admin, file)
  t.match(done, { status: 'succeeded', lines: 8, processed: 8, created: 3, skipped: 1, failed: 3, updated: 0, detail: null })
  const errors = await errorsOf(app, admin, done.id)
  t.same(errors.map((e) => [e.line, e.code]), [[3, 'VALIDATION_FAILED'], [4, 'INVALID_LINE'], [7, 'UNSUPPORTED_HASH']])
  t.equal(errors[2]!.email, 'hashy@example.com', 'the report names the line\'s user')

  const ada = await userByEmail(app, admin, 'ada@example.com')
  t.match(ada, { name: 'Ada Lovelace', status: 'ACTIVE', role: 'user', created_at: '2019-03-01T10:00:00.000Z' })
  t.same(await emailsOf(app, admin, ada!.id), [['ada@example.com', true, true], ['ada@work.example', false, false]])
  t.equal((await signIn(app, 'ada@example.com', 'secret-password-1')).statusCode, 201, 'the bcrypt password signs in')
  const grace = await userByEmail(app, admin, 'grace@example.com')
  t.equal(grace?.name, 'grace', 'a user without a name is named after its address')
  t.equal((await signIn(app, 'grace@example.com', 'anything-at-all')).statusCode, 401, 'a user without a password has none that signs in')
  t.match(await userByEmail(app, admin, 'banned@example.com'), { status: 'BANNED', role: 'admin' })
  t.equal((await userByEmail(app, admin, 'already@example.com'))?.name, (await app.inject({ method: 'GET', url: `/users/${existing.id}`, headers: admin.headers })).json().name, 'skipped: left as it was')

  const events = await app.inject({ method: 'GET', url: '/events?type=user.created&limit=100', headers: admin.headers })
  const created = events.json<{ items: Array<{ actor: { type: string; id: number }; request_id: string; data: { email: string } }> }>().items
    .filter((e) => ['ada@example.com', 'grace@example.com', 'banned@example.com', 'hashy@example.com'].includes(e.data.email))
  t.equal(created.length, 3, 'a user.created for each user created')
  t.ok(created.every((e) => e.actor.type === 'admin' && e.actor.id === admin.id), 'the admin who started the import is the actor')
  t.equal(new Set(created.map((e) => e.request_id)).size, 1, 'with the request id of the POST')

  // The same file again creates nobody twice.
  const again = await imported(app, admin, file)
  t.match(again, { created: 0, skipped: 4, failed: 3 })
  const metrics = await app.metrics.registry.getSingleMetricAsString('roster_import_lines_total')
  t.match(metrics, /result="created"} 3/, 'the metrics count lines by result')
})

t.test('a creation time ahead of the clock fails its line; a blank name is no name', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const soon = new Date(Date.now() + 3600_000).toISOString()
  const file = ndjson(
    { email: 'future@example.com', created_at: '2999-01-01T00:00:00Z' },
    { email: 'skewed@example.com', created_at: soon },
    { email: 'blank@example.com', name: '  ' },
    { email: 'ancient@example.com', created_at: '1969-12-31T23:59:59Z' }
  )
  const done = await imported(app, admin, file)
  t.match(done, { created: 2, failed: 2 })
  t.match(await errorsOf(app, admin, done.id), [
    { line: 1, code: 'VALIDATION_FAILED', detail: '/created_at: is in the future', email: 'future@example.com' },
    { line: 4, code: 'VALIDATION_FAILED', detail: '/created_at: is before 1970, when no account was made' }
  ])
  t.equal((await userByEmail(app, admin, 'skewed@example.com'))?.created_at, soon, 'a clock an hour ahead is a clock, not the future')
  t.equal((await userByEmail(app, admin, 'blank@example.com'))?.name, 'blank', 'named after its address')
  const firebase = JSON.stringify({ users: [{ localId: 'f1', email: 'fb-future@example.com', createdAt: String(Date.now() + 7 * 86400_000) }] })
  const fb = await imported(app, admin, firebase, '?format=firebase', 'application/json')
  t.match(await errorsOf(app, admin, fb.id), [{ code: 'VALIDATION_FAILED', detail: '/createdAt: is in the future' }])
})

t.test('on_conflict=update sets the fields given and adds missing addresses; dry_run changes nothing', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  await imported(app, admin, ndjson({ external_id: 'e-9', name: 'Old Name', email: 'upd@example.com' }))
  const dry = await imported(app, admin, ndjson({ external_id: 'e-9', name: 'New Name', emails: [{ address: 'upd@example.com', verified: true }, { address: 'more@example.com' }] }, { email: 'fresh@example.com' }), '?on_conflict=update&dry_run=true')
  t.match(dry, { status: 'succeeded', updated: 1, created: 1 })
  t.equal((await userByEmail(app, admin, 'upd@example.com'))?.name, 'Old Name', 'a dry run changes nothing')
  t.equal(await userByEmail(app, admin, 'fresh@example.com'), undefined)

  const done = await imported(app, admin, ndjson({ external_id: 'e-9', name: 'New Name', emails: [{ address: 'upd@example.com', verified: true }, { address: 'more@example.com' }] }), '?on_conflict=update')
  t.match(done, { updated: 1 })
  const user = await userByEmail(app, admin, 'upd@example.com')
  t.equal(user?.name, 'New Name')
  t.same(await emailsOf(app, admin, user!.id), [['upd@example.com', true, true], ['more@example.com', false, false]])
  // An address of another user and a different external id fail the line.
  await newUser(app, { email: 'other@example.com' })
  const clash = await imported(app, admin, ndjson({ external_id: 'e-9', emails: [{ address: 'upd@example.com' }, { address: 'other@example.com' }] }), '?on_conflict=update')
  t.match(clash, { failed: 1 })
  t.equal((await errorsOf(app, admin, clash.id))[0]?.code, 'CONFLICT')

  // A user without an external id gains the line's, with its event.
  const plain = await newUser(app, { email: 'plain@example.com', name: 'Plain' })
  t.match(await imported(app, admin, ndjson({ external_id: 'e-10', email: 'plain@example.com', name: 'Plainer' }), '?on_conflict=update'), { updated: 1 })
  t.equal((await app.inject({ url: `/users/${plain.id}`, headers: admin.headers })).json().external_id, 'e-10')
  const events = (await app.inject({ url: `/events?user_id=${plain.id}&type=user.updated`, headers: admin.headers })).json().items
  t.match(events, [{ data: { name: 'Plainer', external_id: 'e-10' }, previous: { name: 'Plain', external_id: null } }], 'one user.updated tells both')
})

t.test('on_conflict=update leaves a user whose deletion is scheduled as it is, until it is restored', async (t) => {
  const app = await build(t, { ...FAST, env: { ACCOUNT_DELETION_GRACE_SECONDS: '600' } })
  const admin = await adminUser(app)
  const leaving = await newUser(app, { email: 'leaving@example.com', name: 'Leaving' })
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${leaving.id}`, headers: admin.headers })).statusCode, 202)
  const line = ndjson({ external_id: 'e-leaving', email: 'leaving@example.com', name: 'Revived' })
  for (const query of ['?on_conflict=update&dry_run=true', '?on_conflict=update']) {
    const done = await imported(app, admin, line, query)
    t.match(done, { failed: 1, updated: 0 }, `${query}: the line fails`)
    t.match(await errorsOf(app, admin, done.id), [{ code: 'CONFLICT', detail: /scheduled for deletion/ }])
  }
  t.match(await imported(app, admin, line), { skipped: 1, failed: 0 }, 'skip still skips it')
  const read = (await app.inject({ url: `/users/${leaving.id}`, headers: admin.headers })).json()
  t.match(read, { name: 'Leaving', external_id: null, deletion_scheduled_at: String }, 'nothing of the line was written')
  t.equal((await app.inject({ method: 'POST', url: `/users/${leaving.id}/restore`, headers: admin.headers })).statusCode, 200)
  t.match(await imported(app, admin, line, '?on_conflict=update'), { updated: 1, failed: 0 }, 'restored, it is updated')
})

t.test('auth0 and firebase files come in as they are, hashes included', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const salt = 'pepper'
  const { createHash } = await import('node:crypto')
  const digest = createHash('sha256').update(salt + 'auth0-password-1').digest('hex')
  const auth0 = JSON.stringify([
    { email: 'a0@example.com', email_verified: true, given_name: 'Ann', family_name: 'Zero', user_id: 'auth0|abc', blocked: false,
      custom_password_hash: { algorithm: 'sha256', hash: { value: digest, encoding: 'hex' }, salt: { value: salt, position: 'prefix' } } },
    { email: 'blocked@example.com', blocked: true, password_hash: await bcrypt('blocked-password', 4) },
    { name: 'no address' }
  ], null, 2)
  const done = await imported(app, admin, auth0, '?format=auth0', 'application/json')
  t.match(done, { status: 'succeeded', lines: 3, created: 2, failed: 1 })
  t.match(await userByEmail(app, admin, 'a0@example.com'), { name: 'Ann Zero', status: 'ACTIVE' })
  t.equal((await signIn(app, 'a0@example.com', 'auth0-password-1')).statusCode, 201, 'Auth0\'s custom hash signs in')
  t.equal((await signIn(app, 'a0@example.com', 'auth0-password-1')).statusCode, 201, 'and again, once replaced by argon2id')
  t.match(await userByEmail(app, admin, 'blocked@example.com'), { status: 'BANNED' })

  // firebase/scrypt's published test vector.
  const firebase = JSON.stringify({ users: [
    { localId: 'fb-1', email: 'fb@example.com', emailVerified: true, displayName: 'Fire Base', createdAt: '1500000000000',
      passwordHash: 'lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==', salt: '42xEC+ixf3L2lw==' },
    { localId: 'fb-2', phoneNumber: '+15555550100' }
  ] })
  const params = '?format=firebase&firebase_signer_key=' + encodeURIComponent('jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==') +
    '&firebase_salt_separator=Bw%3D%3D&firebase_rounds=8&firebase_mem_cost=14'
  const fb = await imported(app, admin, firebase, params, 'application/json')
  t.match(fb, { status: 'succeeded', created: 1, failed: 1 })
  t.match(await userByEmail(app, admin, 'fb@example.com'), { name: 'Fire Base', created_at: new Date(1500000000000).toISOString() })
  t.equal((await signIn(app, 'fb@example.com', 'user1password')).statusCode, 201, 'Firebase\'s modified scrypt signs in')
  t.equal((await signIn(app, 'fb@example.com', 'wrong-password')).statusCode, 401)
})

t.test('a file that is not its format, truncated, too large or abusive: a clear end, nothing half written', async (t) => {
  const app = await build(t, { ...FAST, env: { IMPORT_MAX_BYTES: '4096' } })
  const admin = await adminUser(app)
  const truncated = await imported(app, admin, '[{"email": "t1@example.com"}, {"email": "t2@exa', '?format=auth0', 'application/json')
  t.match(truncated, { status: 'failed', lines: 0, created: 0 })
  t.match(truncated.detail, /truncated/)
  t.equal(await userByEmail(app, admin, 't1@example.com'), undefined, 'not even the complete first element')
  const cutLine = await imported(app, admin, '{"email": "n1@example.com"}\n{"email": "n2@exa')
  t.match(cutLine, { status: 'failed', created: 0 }, 'NDJSON cut inside its last line')
  t.match(cutLine.detail, /line 2: is it truncated/)
  t.equal(await userByEmail(app, admin, 'n1@example.com'), undefined, 'not even the complete first line')
  t.match(await imported(app, admin, '{"email": "n3@example.com"}'), { status: 'succeeded', created: 1 }, 'a whole last line needs no newline')
  const wrongFormat = await imported(app, admin, '[{"email": "w@example.com"}]')
  t.match(wrongFormat, { status: 'failed' })
  t.match(wrongFormat.detail, /not NDJSON/)
  const notFirebase = await imported(app, admin, '{"people": []}', '?format=firebase', 'application/json')
  t.match(notFirebase.detail, /users/)
  const twice = await imported(app, admin, '{"users": [{"localId": "a1", "email": "twice1@example.com"}], "users": [{"localId": "a2", "email": "twice2@example.com"}]}', '?format=firebase', 'application/json')
  t.match(twice, { status: 'failed', created: 0 }, 'two lists of users: which is meant cannot be told')
  t.match(twice.detail, /`users` twice/)
  t.equal(await userByEmail(app, admin, 'twice1@example.com'), undefined, 'nothing of the first list written')
  assertProblem(t, await upload(app, admin, ndjson(...Array.from({ length: 200 }, (_, i) => ({ email: `big${i}@example.com` })))), 413, 'PAYLOAD_TOO_LARGE')
  t.equal(await userByEmail(app, admin, 'big0@example.com'), undefined)
  const list = (await app.inject({ method: 'GET', url: '/imports', headers: admin.headers })).json<{ items: ImportBody[] }>().items
  t.equal(list.length, 6, 'the refused upload left no import behind')
  t.same(list.map((i) => i.id), [...list.map((i) => i.id)].sort((a, b) => b - a), 'newest first')
  for (const [file, format] of [['\n \n', 'roster'], [' [ ] ', 'auth0'], ['{"users": []}', 'firebase']]) {
    t.match(await imported(app, admin, file!, `?format=${format}`, format === 'roster' ? undefined : 'application/json'),
      { status: 'failed', lines: 0, detail: 'The file holds no user' }, `${format}: a file of no user is a mistake, in every format`)
  }
  assertProblem(t, await upload(app, admin, 'x', '?format=csv'), 400, 'VALIDATION_FAILED')
  assertProblem(t, await upload(app, admin, 'x', '?firebase_rounds=8'), 400, 'VALIDATION_FAILED')
  const noBody = await app.inject({ method: 'POST', url: '/imports', headers: admin.headers })
  assertProblem(t, noBody, 400, 'VALIDATION_FAILED')
  t.equal(noBody.json().detail, 'The file to import is required as the body')
  const plain = await newUser(app)
  t.equal((await upload(app, plain, ndjson({ email: 'x@example.com' }))).statusCode, 401, 'admins only')
  t.equal((await app.inject({ method: 'GET', url: '/imports/999', headers: admin.headers })).json().code, 'IMPORT_NOT_FOUND')
})

t.test('lines too long, not UTF-8, or nested deep fail alone', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const deep = '{"email":"deep@example.com","metadata":{"public":' + '{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000) + '}}'
  const long = JSON.stringify({ email: 'long@example.com', name: 'x'.repeat(2 * 1024 * 1024) })
  const file = Buffer.concat([
    Buffer.from(ndjson({ email: 'first@example.com' }, long, deep)),
    Buffer.from('{"email": "bad-'), Buffer.from([0xff, 0xfe]), Buffer.from('@example.com"}\n'),
    Buffer.from(ndjson({ email: 'last@example.com' }))
  ])
  const done = await imported(app, admin, file)
  t.match(done, { status: 'succeeded', lines: 5, created: 2, failed: 3 })
  t.same((await errorsOf(app, admin, done.id)).map((e) => [e.line, e.code]), [[2, 'LINE_TOO_LONG'], [3, 'METADATA_TOO_LARGE'], [4, 'INVALID_LINE']])
})

t.test('a line with a lone UTF-16 surrogate fails alone', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const file = ndjson({ email: 'fine@example.com' }, '{"email":"lone@example.com","name":"lone \\ud800"}', { email: 'after-lone@example.com' })
  const done = await imported(app, admin, file)
  t.match(done, { status: 'succeeded', created: 2, failed: 1 })
  t.same((await errorsOf(app, admin, done.id)).map((e) => [e.line, e.code]), [[2, 'INVALID_LINE']])
  t.equal(await userByEmail(app, admin, 'lone@example.com'), undefined)
})

t.test('a line holding a key __proto__, constructor with prototype, or a number past a double fails alone', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const file = ndjson(
    '{"email":"proto@example.com","metadata":{"public":{"__proto__":{"plan":"pro"}}}}',
    '{"email":"escaped@example.com","metadata":{"private":{"\\u005f_proto__":{"plan":"pro"}}}}',
    '{"email":"ctor@example.com","metadata":{"unsafe":{"constructor":{"prototype":{"plan":"pro"}}}}}',
    { email: 'plain@example.com', metadata: { public: { constructor: 'a key like any other' } } },
    '{"email":"infinite@example.com","metadata":{"public":{"n":1e400}}}'
  )
  const done = await imported(app, admin, file)
  t.match(done, { status: 'succeeded', created: 1, failed: 4 })
  t.same((await errorsOf(app, admin, done.id)).map((e) => [e.line, e.code]), [[1, 'INVALID_LINE'], [2, 'INVALID_LINE'], [3, 'INVALID_LINE'], [5, 'VALIDATION_FAILED']])
  for (const email of ['proto@example.com', 'escaped@example.com', 'ctor@example.com', 'infinite@example.com']) t.equal(await userByEmail(app, admin, email), undefined, email)
  t.ok(await userByEmail(app, admin, 'plain@example.com'))
})

t.test('a ban an import lifts is gone; one it sets is its own: its admin, from its time, no reason, no end', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'ban-sc@example.com' })
  const until = '2030-01-01T00:00:00.000Z'
  const banned = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'BANNED', reason: 'fraud', until } })
  t.equal(banned.statusCode, 200, banned.body)
  const shown = async () => (await app.inject({ url: `/users/${user.id}`, headers: admin.headers })).json()
  t.match(await imported(app, admin, ndjson({ email: 'ban-sc@example.com', status: 'ACTIVE' }), '?on_conflict=update'), { updated: 1 })
  t.match(await shown(), { status: 'ACTIVE', ban: null })
  const before = Date.now()
  t.match(await imported(app, admin, ndjson({ email: 'ban-sc@example.com', status: 'BANNED' }), '?on_conflict=update'), { updated: 1 })
  const again = await shown()
  t.match(again, { status: 'BANNED', ban: { reason: null, until: null, by: { type: 'admin', id: admin.id } } })
  t.ok(Date.parse(again.ban.at) >= before - 1000, 'from the import\'s time, not the old ban\'s')
  const refused = await signIn(app, 'ban-sc@example.com', user.password)
  assertProblem(t, refused, 401, 'USER_BANNED')
  t.equal(refused.json().banned_until, undefined, 'no end to tell')
  t.match(await imported(app, admin, ndjson({ email: 'new-banned@example.com', status: 'BANNED' })), { created: 1 })
  const fresh = await userByEmail(app, admin, 'new-banned@example.com')
  t.match((await app.inject({ url: `/users/${fresh!.id}`, headers: admin.headers })).json(), { status: 'BANNED', ban: { by: { type: 'admin', id: admin.id } } })
})

t.test('multipart: the fields, then a part named file', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const form = multipart({ on_conflict: 'skip', dry_run: 'false', file: { filename: 'users.ndjson', content: ndjson({ email: 'mp@example.com', name: 'Multi Part' }), type: 'application/x-ndjson' } })
  const res = await app.inject({ method: 'POST', url: '/imports', headers: { ...admin.headers, ...form.headers }, payload: form.payload })
  t.equal(res.statusCode, 202, res.body)
  t.match(await finished(app, admin, res.json<ImportBody>().id), { status: 'succeeded', created: 1 })
  // A field the query leaves out is the field's: the query's own default must not override it.
  const dry = multipart({ dry_run: 'true', file: { filename: 'users.ndjson', content: ndjson({ email: 'dry-mp@example.com' }), type: 'application/x-ndjson' } })
  const dryRes = await app.inject({ method: 'POST', url: '/imports', headers: { ...admin.headers, ...dry.headers }, payload: dry.payload })
  t.equal(dryRes.statusCode, 202, dryRes.body)
  t.equal(dryRes.json<ImportBody>().dry_run, true, 'a dry run, as the field asked')
  t.match(await finished(app, admin, dryRes.json<ImportBody>().id), { status: 'succeeded', dry_run: true, created: 1 })
  t.equal(await userByEmail(app, admin, 'dry-mp@example.com'), undefined, 'and nothing written')
  // A field after the file would be read once the file is in: a dry run asked there is refused, not ignored.
  const before = (await app.inject({ url: '/imports', headers: admin.headers })).json<{ items: unknown[] }>().items.length
  const late = multipart({ file: { filename: 'users.ndjson', content: ndjson({ email: 'late-mp@example.com' }), type: 'application/x-ndjson' }, dry_run: 'true' })
  const lateRes = await app.inject({ method: 'POST', url: '/imports', headers: { ...admin.headers, ...late.headers }, payload: late.payload })
  assertProblem(t, lateRes, 400, 'VALIDATION_FAILED', 'a field after the file')
  t.match(lateRes.json(), { errors: [{ path: '/dry_run', in: 'body', message: 'follows the part named file: the fields go before it' }] })
  const second = multipart({ file: { filename: 'a.ndjson', content: ndjson({ email: 'late-mp@example.com' }) }, other: { filename: 'b.ndjson', content: '{}' } })
  assertProblem(t, await app.inject({ method: 'POST', url: '/imports', headers: { ...admin.headers, ...second.headers }, payload: second.payload }), 400, 'VALIDATION_FAILED', 'a second file')
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal((await app.inject({ url: '/imports', headers: admin.headers })).json<{ items: unknown[] }>().items.length, before, 'no import left behind')
  t.equal(await userByEmail(app, admin, 'late-mp@example.com'), undefined, 'and nobody imported')
  // A field past the limit of 20 is skipped unseen by the parser: it could be a dry_run, so the upload is refused.
  const crowded = ['--b', ...Array.from({ length: 20 }, () => 'Content-Disposition: form-data; name="format"\r\n\r\nroster\r\n--b'),
    'Content-Disposition: form-data; name="dry_run"\r\n\r\ntrue\r\n--b',
    `Content-Disposition: form-data; name="file"; filename="u.ndjson"\r\n\r\n${ndjson({ email: 'crowded@example.com' })}\r\n--b--\r\n`].join('\r\n')
  const crowdedRes = await app.inject({ method: 'POST', url: '/imports', headers: { ...admin.headers, 'content-type': 'multipart/form-data; boundary=b' }, payload: crowded })
  assertProblem(t, crowdedRes, 400, 'VALIDATION_FAILED', 'more fields than the parser reads')
  t.match(crowdedRes.json().errors, [{ message: 'holds more than 20 fields or 30 parts' }])
  t.equal(await userByEmail(app, admin, 'crowded@example.com'), undefined)
  const missing = multipart({ format: 'roster' })
  assertProblem(t, await app.inject({ method: 'POST', url: '/imports', headers: { ...admin.headers, ...missing.headers }, payload: missing.payload }), 400, 'VALIDATION_FAILED')
  const noBoundary = await app.inject({ method: 'POST', url: '/imports', headers: { ...admin.headers, 'content-type': 'multipart/form-data' }, payload: '--xyz--\r\n' })
  assertProblem(t, noBoundary, 400, 'VALIDATION_FAILED', 'a multipart type without a boundary')
})

t.test('an address held for a revert fails its line alone, in a real run and a dry one', async (t) => {
  const app = await build(t, FAST)
  const admin = await adminUser(app)
  const owner = await newUser(app, { email: 'held@example.com' })
  await app.db.insertInto('email_reverts').values({
    user_id: owner.id, address: 'held@example.com', address_norm: 'held@example.com', token_hash: 'a'.repeat(64), code_hash: 'b'.repeat(64),
    created_at: Date.now(), expires_at: Date.now() + 60_000
  }).execute()
  await app.inject({ method: 'DELETE', url: `/users/${owner.id}/email`, headers: owner.headers })
  await app.db.deleteFrom('emails').where('address_norm', '=', 'held@example.com').execute()
  const file = ndjson({ email: 'before@example.com' }, { email: 'held@example.com' }, { email: 'after@example.com' })
  for (const query of ['?dry_run=true', '']) {
    const done = await imported(app, admin, file, query)
    t.match(done, { status: 'succeeded', created: 2, failed: 1 }, `held: refused ${query || 'for real'}`)
    t.same((await errorsOf(app, admin, done.id)).map((e) => [e.line, e.code]), [[2, 'EMAIL_TAKEN']])
  }
  t.equal(await userByEmail(app, admin, 'held@example.com'), undefined)
  t.ok(await userByEmail(app, admin, 'after@example.com'), 'the lines after it applied')
})

t.test('a batch writes its new users together; lines of one batch naming one user still meet it, in order', async (t) => {
  const app = await build(t, { imports: { pollMs: 20, batch: 50 } })
  const admin = await adminUser(app)
  // The newest user deleted: no id is ever given twice, so none of it may come back to a new user.
  const gone = await newUser(app)
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${gone.id}`, headers: admin.headers })).statusCode, 204)
  const file = ndjson(
    { external_id: 'e-1', email: 'one@example.com', name: 'One', metadata: { public: { plan: 'pro' } } },
    { email: 'two@example.com' },
    { external_id: 'e-1', email: 'one-again@example.com', name: 'One Again' },
    { email: 'TWO@example.com', name: 'Two Twice' },
    { email: 'three@example.com', name: 'Three' },
    { emails: [{ address: 'four@example.com', primary: true }, { address: 'four@work.example', verified: true }], name: 'Four' },
    { email: 'five@example.com', name: 'Five' },
    { email: 'six@example.com', name: 'Six' }
  )
  const done = await imported(app, admin, file, '?on_conflict=update')
  t.match(done, { status: 'succeeded', created: 6, updated: 2, failed: 0 })
  // The lines written together: each user with its own name, addresses and marks.
  for (const [address, name] of [['three', 'Three'], ['four', 'Four'], ['five', 'Five'], ['six', 'Six']]) {
    t.equal((await userByEmail(app, admin, `${address}@example.com`))?.name, name, `${address}@example.com is ${name}'s`)
  }
  const four = await userByEmail(app, admin, 'four@example.com')
  t.same(await emailsOf(app, admin, four!.id), [['four@example.com', true, false], ['four@work.example', false, true]])
  const one = await userByEmail(app, admin, 'one@example.com')
  t.equal(one?.name, 'One Again', 'the later line updated the user the earlier one created')
  t.same(await emailsOf(app, admin, one!.id), [['one@example.com', true, false], ['one-again@example.com', false, false]])
  t.equal((await userByEmail(app, admin, 'two@example.com'))?.name, 'Two Twice')
  const metadata = await app.inject({ url: `/users/${one!.id}/metadata`, headers: admin.headers })
  t.same(metadata.json<{ public: unknown }>().public, { plan: 'pro' })
  const events = (await app.inject({ url: '/events?limit=200', headers: admin.headers })).json<{ items: Array<{ type: string; user_id: number }> }>().items
    .filter((e) => e.user_id !== admin.id && e.user_id !== gone.id).map((e) => e.type)
  t.same(events.filter((type) => type === 'user.created').length, 6, 'one user.created a user')
  t.same(events.filter((type) => type === 'user.metadata_changed').length, 1)
  t.same(events.filter((type) => type === 'user.updated').length, 2)
  const ids = (await app.db.selectFrom('users').select('id').where('id', '!=', admin.id).execute()).map((r) => r.id)
  t.ok(ids.length === 6 && ids.every((id) => id > gone.id), `new ids only (${ids.join(', ')} after ${gone.id})`)
})
