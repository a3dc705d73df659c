import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, login, newUser, type TestUser } from '../helpers.js'

type Kind = 'anonymous' | 'self' | 'other' | 'admin'
const KINDS: Kind[] = ['anonymous', 'self', 'other', 'admin']

interface Case {
  name: string
  request: (target: TestUser) => { method: 'GET' | 'PUT' | 'DELETE'; url: string; payload?: Record<string, string> }
  expect: Record<Kind, number | 'FORBIDDEN' | 'UNAUTHENTICATED'>
}

const cases: Case[] = [
  { name: 'GET /users/{id}', request: (u) => ({ method: 'GET', url: `/users/${u.id}` }), expect: { anonymous: 'UNAUTHENTICATED', self: 200, other: 'FORBIDDEN', admin: 200 } },
  { name: 'GET /users/email/{email}', request: (u) => ({ method: 'GET', url: `/users/email/${encodeURIComponent(u.email.toUpperCase())}` }), expect: { anonymous: 'UNAUTHENTICATED', self: 200, other: 'FORBIDDEN', admin: 200 } },
  { name: 'PUT /users/{id}/name', request: (u) => ({ method: 'PUT', url: `/users/${u.id}/name`, payload: { name: 'Renamed' } }), expect: { anonymous: 'UNAUTHENTICATED', self: 200, other: 'FORBIDDEN', admin: 200 } },
  { name: 'PUT /users/{id}/status', request: (u) => ({ method: 'PUT', url: `/users/${u.id}/status`, payload: { status: 'BANNED' } }), expect: { anonymous: 'UNAUTHENTICATED', self: 'FORBIDDEN', other: 'FORBIDDEN', admin: 200 } },
  { name: 'PUT /users/{id}/role', request: (u) => ({ method: 'PUT', url: `/users/${u.id}/role`, payload: { role: 'admin' } }), expect: { anonymous: 'UNAUTHENTICATED', self: 'FORBIDDEN', other: 'FORBIDDEN', admin: 200 } },
  { name: 'PUT /users/{id}/password', request: (u) => ({ method: 'PUT', url: `/users/${u.id}/password`, payload: { password: 'brand-new-pass', current_password: u.password } }), expect: { anonymous: 'UNAUTHENTICATED', self: 204, other: 'FORBIDDEN', admin: 204 } },
  { name: 'DELETE /users/{id}', request: (u) => ({ method: 'DELETE', url: `/users/${u.id}` }), expect: { anonymous: 'UNAUTHENTICATED', self: 204, other: 'FORBIDDEN', admin: 204 } }
]

async function snapshot(app: App) {
  const users = await app.db.selectFrom('users').select(['id', 'name', 'status', 'role', 'version', 'password_hash']).orderBy('id').execute()
  const emails = await app.db.selectFrom('emails').select(['id', 'address', 'primary_user_id']).orderBy('id').execute()
  return JSON.stringify({ users, emails })
}

for (const c of cases) {
  t.test(`authorization matrix: ${c.name}`, async (t) => {
    const app = await build(t)
    const admin = await adminUser(app)
    for (const kind of KINDS) {
      const target = await newUser(app)
      const other = await newUser(app)
      const headers = { anonymous: {}, self: target.headers, other: other.headers, admin: admin.headers }[kind]
      const before = await snapshot(app)
      const res = await app.inject({ ...c.request(target), headers })
      const expected = c.expect[kind]
      if (typeof expected === 'number') {
        t.equal(res.statusCode, expected, `${kind}: ${expected} (${res.body.slice(0, 120)})`)
      } else {
        assertProblem(t, res, 401, expected, `${kind}`)
        t.match(res.headers['www-authenticate'], expected === 'FORBIDDEN' ? /^Bearer realm="api", error="insufficient_scope"$/ : /^Bearer realm="api"$/)
        t.equal(await snapshot(app), before, `${kind}: a refusal changes nothing`)
      }
    }
  })
}

t.test('unknown users: 404 for an admin, the same 401 as an existing user for anyone else', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const plain = await newUser(app)
  const other = await newUser(app)
  for (const [method, url] of [['GET', '/users/999999'], ['DELETE', '/users/999999'], ['GET', '/users/email/nobody%40example.com']] as const) {
    assertProblem(t, await app.inject({ method, url, headers: admin.headers }), 404, 'USER_NOT_FOUND', `admin ${method} ${url}`)
    const missing = await app.inject({ method, url, headers: plain.headers })
    assertProblem(t, missing, 401, 'FORBIDDEN', `plain ${method} ${url}`)
  }
  const existing = await app.inject({ url: `/users/${other.id}`, headers: plain.headers })
  const missing = await app.inject({ url: '/users/999999', headers: plain.headers })
  t.same(existing.json().code, missing.json().code, 'existence is not revealed')
  t.same(existing.headers['www-authenticate'], missing.headers['www-authenticate'])
})

t.test('GET /users/{id} and /users/email/{email}', async (t) => {
  const app = await build(t, { env: { PUBLIC_URL: 'https://api.example.com/' } })
  const admin = await adminUser(app)
  const user = await newUser(app, { name: 'Ada Lovelace', email: 'Ada@Example.com' })
  await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'countess@example.org' } })
  const res = await app.inject({ url: `/users/${user.id}`, headers: user.headers })
  t.equal(res.statusCode, 200)
  t.match(res.headers.etag, /^"v\d+"$/)
  const body = res.json()
  t.same(Object.keys(body).sort(), ['ban', 'created_at', 'deletion_scheduled_at', 'email', 'external_id', 'href', 'id', 'name', 'role', 'status', 'updated_at'])
  t.equal(body.href, `https://api.example.com/users/${user.id}`, 'PUBLIC_URL makes hrefs absolute')
  t.equal(body.email, 'Ada@Example.com', 'the primary address, as given')

  const byOther = await app.inject({ url: '/users/email/COUNTESS%40example.org', headers: admin.headers })
  t.equal(byOther.statusCode, 200, 'any address, any case')
  t.equal(byOther.json().id, user.id)
})

t.test('ids in paths are canonical decimal', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: admin.headers })).statusCode, 200)
  for (const alias of [`0${user.id}`, `${user.id}e0`, `0x${user.id.toString(16)}`, `+${user.id}`, `%20${user.id}`, `${user.id}.0`, '9007199254740992', '0', '-1', '99999999999999999999', '9'.repeat(309)]) {
    assertProblem(t, await app.inject({ url: `/users/${alias}`, headers: admin.headers }), 400, 'VALIDATION_FAILED', `/users/${alias}`)
  }
  assertProblem(t, await app.inject({ url: `/users/${user.id}/`, headers: admin.headers }), 404, 'NOT_FOUND', 'trailing slash')
  assertProblem(t, await app.inject({ url: '/users/9007199254740991', headers: admin.headers }), 404, 'USER_NOT_FOUND', 'largest id is valid')
})

t.test('DELETE /users/{id} removes its addresses and tokens', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { email: 'gone@example.com' })
  await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'gone2@example.com' } })
  const res = await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: user.headers })
  t.equal(res.statusCode, 204)
  t.equal((await app.db.selectFrom('emails').select('id').where('user_id', '=', user.id).execute()).length, 0)
  t.equal((await app.db.selectFrom('tokens').select('id').where('user_id', '=', user.id).execute()).length, 0)
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: user.headers }), 401, 'UNAUTHENTICATED')
  const again = await newUser(app, { email: 'GONE@example.com' })
  t.ok(again.id > user.id, 'the address is free again')
})

t.test('password changes', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'pw@example.com', password: 'first-password' })
  const other = await login(app, 'pw@example.com', 'first-password')

  const missing = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, headers: user.headers, payload: { password: 'second-password' } })
  assertProblem(t, missing, 400, 'VALIDATION_FAILED', 'self without current_password')
  const wrong = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, headers: user.headers, payload: { password: 'second-password', current_password: 'nope-nope' } })
  assertProblem(t, wrong, 401, 'INVALID_CREDENTIALS', 'wrong current password')
  const short = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, headers: user.headers, payload: { password: 'short', current_password: 'first-password' } })
  assertProblem(t, short, 400, 'VALIDATION_FAILED', 'too short')

  const ok = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, headers: user.headers, payload: { password: 'second-password', current_password: 'first-password' } })
  t.equal(ok.statusCode, 204)
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode, 200, 'the calling token lives')
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: { authorization: `Bearer ${other}` } }), 401, 'UNAUTHENTICATED', 'other tokens are revoked')
  await t.rejects(login(app, 'pw@example.com', 'first-password'), 'old password is gone')

  const byAdmin = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, headers: admin.headers, payload: { password: 'third-password' } })
  t.equal(byAdmin.statusCode, 204, 'an admin needs no current password')
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: user.headers }), 401, 'UNAUTHENTICATED', 'admin reset revokes every token')
  t.ok(await login(app, 'pw@example.com', 'third-password'))
})

t.test('promoting a user to admin widens what it may reach; invalid values change nothing', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const other = await newUser(app)
  assertProblem(t, await app.inject({ url: `/users/${other.id}`, headers: user.headers }), 401, 'FORBIDDEN', 'before')
  const bad = await app.inject({ method: 'PUT', url: `/users/${user.id}/role`, headers: admin.headers, payload: { role: 'root' } })
  assertProblem(t, bad, 400, 'VALIDATION_FAILED', 'unknown role')
  const promoted = await app.inject({ method: 'PUT', url: `/users/${user.id}/role`, headers: admin.headers, payload: { role: 'admin' } })
  t.equal(promoted.statusCode, 200)
  t.equal(promoted.json().role, 'admin')
  t.equal((await app.inject({ url: `/users/${other.id}`, headers: user.headers })).statusCode, 200, 'after')
})

t.test('the last active admin cannot be demoted, banned or deleted', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  for (const [what, req] of [
    ['demoted', { method: 'PUT', url: `/users/${admin.id}/role`, payload: { role: 'user' } }],
    ['banned', { method: 'PUT', url: `/users/${admin.id}/status`, payload: { status: 'BANNED' } }],
    ['deleted', { method: 'DELETE', url: `/users/${admin.id}` }]
  ] as const) {
    assertProblem(t, await app.inject({ ...req, headers: admin.headers }), 409, 'LAST_ADMIN', `the only admin ${what}`)
  }
  t.equal((await app.inject({ url: `/users/${admin.id}`, headers: admin.headers })).json().role, 'admin', 'still an admin')

  const second = await newUser(app)
  t.equal((await app.inject({ method: 'PUT', url: `/users/${second.id}/role`, headers: admin.headers, payload: { role: 'admin' } })).statusCode, 200)
  // Two admins demoting each other at once: one wins, the other finds itself the last.
  const both = await Promise.all([
    app.inject({ method: 'PUT', url: `/users/${second.id}/role`, headers: admin.headers, payload: { role: 'user' } }),
    app.inject({ method: 'PUT', url: `/users/${admin.id}/role`, headers: second.headers, payload: { role: 'user' } })
  ])
  const codes = both.map((r) => r.statusCode).sort()
  // The loser finds itself the last admin (409), or was demoted first and its session ended with it (401).
  t.equal(codes.filter((c) => c === 200).length, 1, `one demotion, never both (${codes.join(', ')})`)
  t.ok(codes.every((c) => c === 200 || c === 409 || c === 401), 'the other refused')
  const admins = await app.db.selectFrom('users').select('id').where('role', '=', 'admin').where('status', '=', 'ACTIVE').execute()
  t.equal(admins.length, 1, 'one active admin left')
})

t.test('names that lengthen when normalised: 400 on every engine, never a 500 or a silent overflow', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  for (const ch of ['İ', '\u0958', '\uFB2C']) {
    const grows = ch.repeat(101)
    t.ok([...grows.normalize('NFC').toLowerCase()].length > 200, `${JSON.stringify(ch)} × 101 grows past 200`)
    const signup = await app.inject({ method: 'POST', url: '/users', payload: { name: grows, email: `grow${ch.codePointAt(0)}@example.com`, password: 'password-123' } })
    assertProblem(t, signup, 400, 'VALIDATION_FAILED', `sign-up with ${JSON.stringify(ch)} × 101`)
    t.equal(signup.json().errors[0].path, '/name')
    assertProblem(t, await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: grows } }), 400, 'VALIDATION_FAILED', 'rename')
  }
  const fits = 'İ'.repeat(100)
  const renamed = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: fits } })
  t.equal(renamed.statusCode, 200, 'one that fits once lower-cased is stored')
  t.equal(renamed.json().name, fits, 'as sent')
})

t.test('names refuse control and invisible spoofing characters, and keep the joiners scripts need', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  for (const bad of ['A\u0000b', 'A\u200Bb', 'Ada\n', '\u0007bell', 'x\u202Eevil', '\uFEFFAda', '   ']) {
    assertProblem(t, await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: bad } }), 400, 'VALIDATION_FAILED', JSON.stringify(bad))
  }
  for (const good of ['Ada Lovelace', '👩‍💻 Ada', 'مهر\u200Cناز', 'Zoë']) {
    t.equal((await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: good } })).statusCode, 200, JSON.stringify(good))
  }
})

t.test('a lone UTF-16 surrogate in a JSON body is refused: 400, nothing written, on every engine', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { name: 'Kept Name' })
  for (const body of ['{"name":"x\\ud800y"}', '{"name":"x\\uDC00"}', '{"name":"ok","\\ud83d":1}']) {
    const res = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...user.headers, 'content-type': 'application/json' }, payload: body })
    assertProblem(t, res, 400, 'VALIDATION_FAILED', body)
  }
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json().name, 'Kept Name')
  const paired = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...user.headers, 'content-type': 'application/json' }, payload: '{"name":"Ada \\ud83d\\ude00"}' })
  t.equal(paired.statusCode, 200, 'a pair escaped is one character')
  t.equal(paired.json().name, 'Ada 😀')
})

t.test('asking a user to be what it is writes nothing: the same version, no event', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app, { name: 'Same Name' })
  const events = async () => (await app.inject({ url: `/events?user_id=${user.id}&limit=100`, headers: admin.headers })).json<{ items: unknown[] }>().items.length
  const before = await events()
  const tag = (await app.inject({ url: `/users/${user.id}`, headers: admin.headers })).headers.etag
  const same: Array<[string, Record<string, string>]> = [['name', { name: ' Same Name ' }], ['status', { status: 'ACTIVE' }], ['role', { role: 'user' }]]
  for (const [field, payload] of same) {
    const res = await app.inject({ method: 'PUT', url: `/users/${user.id}/${field}`, headers: { ...admin.headers, 'if-match': String(tag) }, payload })
    t.equal(res.statusCode, 200, field)
    t.equal(res.headers.etag, tag, `${field}: the version stays`)
  }
  t.equal(await events(), before, 'no event')
  assertProblem(t, await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: { ...admin.headers, 'if-match': '"v99"' }, payload: { status: 'ACTIVE' } }), 412, 'PRECONDITION_FAILED')
  const banned = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'BANNED', reason: 'spam' } })
  t.not(banned.headers.etag, tag, 'a change is a new version')
  const again = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'BANNED', reason: 'spam' } })
  t.not(again.headers.etag, banned.headers.etag, 'a ban placed again is a new ban: its time and author are new')
})
