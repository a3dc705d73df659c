import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, newUser, sharedDatabase, type TestUser } from '../helpers.js'

const MERGE = { 'content-type': 'application/merge-patch+json' }

const url = (id: number) => `/users/${id}/metadata`

async function patch(app: App, who: TestUser, id: number, body: unknown, headers: Record<string, string> = {}) {
  return app.inject({ method: 'PATCH', url: url(id), headers: { ...who.headers, ...MERGE, ...headers }, payload: JSON.stringify(body) })
}

async function read(app: App, who: TestUser, id: number) {
  return app.inject({ method: 'GET', url: url(id), headers: who.headers })
}

async function setup(t: Test, env: Record<string, string> = {}) {
  const app = await build(t, { env, imports: { pollMs: 20 } })
  return { app, admin: await adminUser(app), ada: await newUser(app), bob: await newUser(app) }
}

t.test('who reads which part', async (t) => {
  const { app, admin, ada, bob } = await setup(t)
  const empty = await read(app, ada, ada.id)
  t.equal(empty.statusCode, 200)
  t.same(empty.json(), { href: url(ada.id), public: {}, unsafe: {} })
  t.equal(empty.headers.etag, '"v1"')
  t.equal((await patch(app, admin, ada.id, { public: { plan: 'pro' }, private: { note: 'vip' }, unsafe: { theme: 'dark' } })).statusCode, 200)

  const own = await read(app, ada, ada.id)
  t.same(own.json(), { href: url(ada.id), public: { plan: 'pro' }, unsafe: { theme: 'dark' } }, 'a user never sees private')
  t.equal(own.headers.etag, '"v2"')
  t.same((await read(app, admin, ada.id)).json().private, { note: 'vip' }, 'an admin does')
  assertProblem(t, await read(app, bob, ada.id), 401, 'FORBIDDEN')
  assertProblem(t, await read(app, admin, 999999), 404, 'USER_NOT_FOUND')
})

t.test('who writes which part: a plain user only unsafe, and a refusal changes nothing', async (t) => {
  const { app, admin, ada, bob } = await setup(t)
  for (const body of [{ public: { plan: 'pro' } }, { private: { x: 1 } }, { public: { plan: 'pro' }, unsafe: { a: 1 } }]) {
    assertProblem(t, await patch(app, ada, ada.id, body), 401, 'FORBIDDEN')
    const put = await app.inject({ method: 'PUT', url: url(ada.id), headers: ada.headers, payload: body })
    assertProblem(t, put, 401, 'FORBIDDEN')
  }
  t.same((await read(app, admin, ada.id)).json(), { href: url(ada.id), public: {}, unsafe: {}, private: {} }, 'nothing changed')
  t.equal((await read(app, admin, ada.id)).headers.etag, '"v1"')
  const own = await patch(app, ada, ada.id, { unsafe: { theme: 'dark' } })
  t.equal(own.statusCode, 200)
  t.same(own.json(), { href: url(ada.id), public: {}, unsafe: { theme: 'dark' } })
  assertProblem(t, await patch(app, bob, ada.id, { unsafe: { x: 1 } }), 401, 'FORBIDDEN')
  assertProblem(t, await patch(app, admin, ada.id, { secret: {} }), 400, 'VALIDATION_FAILED')
})

t.test('merge semantics: null deletes, nested merge, an empty part patched, application/json read alike', async (t) => {
  const { app, admin, ada } = await setup(t)
  let res = await patch(app, admin, ada.id, { public: { plan: 'free', trial_ends: '2026-12-01', prefs: { a: 1, b: { c: 2 } } } })
  t.equal(res.statusCode, 200)
  res = await patch(app, admin, ada.id, { public: { plan: 'pro', trial_ends: null, prefs: { b: { d: 3 }, a: null } } })
  t.same(res.json().public, { plan: 'pro', prefs: { b: { c: 2, d: 3 } } })
  t.same(res.json().private, {}, 'a part left out is untouched')
  res = await app.inject({ method: 'PATCH', url: url(ada.id), headers: admin.headers, payload: { private: { k: [1, 2] } } })
  t.equal(res.statusCode, 200, 'application/json is a merge patch too')
  t.same(res.json().private, { k: [1, 2] })
  t.same(res.json().public, { plan: 'pro', prefs: { b: { c: 2, d: 3 } } })
  res = await patch(app, admin, ada.id, { public: null })
  t.same(res.json().public, {}, 'a part set to null is emptied')
  const before = res.headers.etag
  res = await patch(app, admin, ada.id, { unsafe: { gone: null } })
  t.equal(res.headers.etag, before, 'a patch that changes nothing makes no new version')
})

t.test('PUT replaces the parts it names', async (t) => {
  const { app, admin, ada } = await setup(t)
  await patch(app, admin, ada.id, { public: { a: 1, b: 2 }, unsafe: { u: 1 } })
  const res = await app.inject({ method: 'PUT', url: url(ada.id), headers: admin.headers, payload: { public: { c: 3 } } })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { href: url(ada.id), public: { c: 3 }, unsafe: { u: 1 }, private: {} })
  const own = await app.inject({ method: 'PUT', url: url(ada.id), headers: ada.headers, payload: { unsafe: {} } })
  t.same(own.json().unsafe, {})
})

t.test('limits: bytes and depth', async (t) => {
  const { app, admin, ada } = await setup(t, { METADATA_MAX_BYTES: '64' })
  assertProblem(t, await patch(app, admin, ada.id, { public: { text: 'x'.repeat(60) } }), 400, 'METADATA_TOO_LARGE')
  t.equal((await patch(app, admin, ada.id, { public: { text: 'x'.repeat(40) } })).statusCode, 200)
  assertProblem(t, await patch(app, admin, ada.id, { public: { more: 'y'.repeat(30) } }), 400, 'METADATA_TOO_LARGE', 'the merged part counts')
  let deep: Record<string, unknown> = {}
  for (let i = 0; i < 10; i++) deep = { d: deep }
  assertProblem(t, await patch(app, ada, ada.id, { unsafe: deep }), 400, 'METADATA_TOO_LARGE')
  t.same((await read(app, admin, ada.id)).json().public, { text: 'x'.repeat(40) }, 'nothing changed')
  t.same((await read(app, admin, ada.id)).json().unsafe, {})
})

t.test('a number past a double, or a key __proto__, is refused by name and changes nothing', async (t) => {
  const { app, ada } = await setup(t)
  const send = (payload: string) => app.inject({ method: 'PATCH', url: url(ada.id), headers: { ...ada.headers, ...MERGE }, payload })
  for (const body of ['{"unsafe":{"e":1e400}}', '{"unsafe":{"n":[1,-1e999]}}']) {
    const res = await send(body)
    assertProblem(t, res, 400, 'VALIDATION_FAILED', body)
    t.match(res.json().detail, /past what a double holds/)
  }
  for (const body of ['{"unsafe":{"__proto__":{"plan":"pro"}}}', '{"unsafe":{"constructor":{"prototype":{"plan":"pro"}}}}']) {
    const res = await send(body)
    assertProblem(t, res, 400, 'VALIDATION_FAILED', body)
    t.match(res.json().detail, /__proto__, or constructor with prototype/, 'the detail names the key, not the content type')
  }
  const broken = await send('{"unsafe":')
  assertProblem(t, broken, 400, 'VALIDATION_FAILED')
  t.match(broken.json().detail, /^The body is not valid JSON/)
  t.notMatch(broken.json().detail, /application\/json/, 'merge-patch is not called application/json')
  t.same((await read(app, ada, ada.id)).json().unsafe, {}, 'nothing written')
  t.equal((await send('{"unsafe":{"constructor":"a key like any other","n":1e300}}')).statusCode, 200)
})

t.test('a PUT of three full parts fits, escaped as an ASCII-only encoder writes them', async (t) => {
  const { app, admin, ada } = await setup(t)
  // Each part just under METADATA_MAX_BYTES (8192) as compact JSON; the body holds all three, é written as \u00e9.
  const part = (c: string) => ({ text: c.repeat(4000) })
  const body = JSON.stringify({ public: part('é'), private: part('é'), unsafe: part('é') }).replace(/é/g, '\\u00e9')
  const res = await app.inject({ method: 'PUT', url: url(ada.id), headers: { ...admin.headers, 'content-type': 'application/json' }, payload: body })
  t.equal(res.statusCode, 200, `${body.length} bytes (${res.body.slice(0, 100)})`)
  t.equal(res.json().private.text, 'é'.repeat(4000))
})

t.test('If-Match: a stale version is 412 and changes nothing', async (t) => {
  const { app, admin, ada } = await setup(t)
  t.equal((await patch(app, admin, ada.id, { public: { a: 1 } }, { 'if-match': '"v1"' })).statusCode, 200)
  assertProblem(t, await patch(app, admin, ada.id, { public: { a: 2 } }, { 'if-match': '"v1"' }), 412, 'PRECONDITION_FAILED')
  const put = await app.inject({ method: 'PUT', url: url(ada.id), headers: { ...admin.headers, 'if-match': '"v1"' }, payload: { public: {} } })
  assertProblem(t, put, 412, 'PRECONDITION_FAILED')
  t.same((await read(app, admin, ada.id)).json().public, { a: 1 })
})

t.test('two concurrent patches of different keys both survive; a PATCH racing a PUT with If-Match loses cleanly', async (t) => {
  const { app, admin, ada } = await setup(t)
  const keys = Array.from({ length: 8 }, (_, i) => `k${i}`)
  const answers = await Promise.all(keys.map((k, i) => patch(app, i % 2 ? admin : ada, ada.id, { unsafe: { [k]: i } })))
  t.same(answers.map((r) => r.statusCode), keys.map(() => 200))
  t.same((await read(app, admin, ada.id)).json().unsafe, Object.fromEntries(keys.map((k, i) => [k, i])), 'no lost update')

  const tag = (await read(app, admin, ada.id)).headers.etag as string
  const [put, racing] = await Promise.all([
    app.inject({ method: 'PUT', url: url(ada.id), headers: { ...admin.headers, 'if-match': tag }, payload: { unsafe: { replaced: true } } }),
    patch(app, admin, ada.id, { unsafe: { late: true } }, { 'if-match': tag })
  ])
  const codes = [put.statusCode, racing.statusCode].sort()
  t.same(codes, [200, 412], 'exactly one wins')
  const now = (await read(app, admin, ada.id)).json().unsafe
  t.same(now, put.statusCode === 200 ? { replaced: true } : { ...Object.fromEntries(keys.map((k, i) => [k, i])), late: true }, 'the loser left nothing')
})

t.test('events: previous values, and a user\'s own activity never shows private', async (t) => {
  const { app, admin, ada } = await setup(t)
  await patch(app, admin, ada.id, { public: { plan: 'free' }, private: { note: 'first' } })
  await patch(app, admin, ada.id, { public: { plan: 'pro' }, private: { note: 'second' } })
  const feed = await app.inject({ method: 'GET', url: `/events?type=user.metadata_changed&user_id=${ada.id}`, headers: admin.headers })
  const items = feed.json().items
  t.equal(items.length, 2)
  t.same(items[1].data, { href: url(ada.id), public: { plan: 'pro' }, unsafe: {}, private: { note: 'second' } })
  t.same(items[1].previous, { public: { plan: 'free' }, private: { note: 'first' } })
  t.same(items[0].previous, { public: { plan: null }, private: { note: null } }, 'keys absent before are null')
  t.same(items[1].actor, { type: 'admin', id: admin.id })

  const own = await app.inject({ method: 'GET', url: `/users/${ada.id}/events?type=user.metadata_changed`, headers: ada.headers })
  t.equal(own.statusCode, 200)
  t.equal(own.json().items.length, 2)
  for (const event of own.json().items) {
    t.notOk('private' in event.data, 'no private in data')
    t.notOk('private' in event.previous, 'no private in previous')
  }
  t.same(own.json().items[0].previous, { public: { plan: 'free' } })
  const asAdmin = await app.inject({ method: 'GET', url: `/users/${ada.id}/events?type=user.metadata_changed`, headers: admin.headers })
  t.same(asAdmin.json().items[0].data.private, { note: 'second' }, 'an admin sees all')
})

t.test('the filter on metadata.public, and private refused to a plain user', async (t) => {
  const { app, admin, ada, bob } = await setup(t)
  await patch(app, admin, ada.id, { public: { plan: 'pro', seats: 5, beta: true, tag: 'Mixed' }, private: { tier: 'gold' } })
  await patch(app, admin, bob.id, { public: { plan: 'free', seats: 50 } })
  const ids = async (filter: string, who: TestUser = admin) => {
    const res = await app.inject({ method: 'GET', url: `/users?filter=${encodeURIComponent(filter)}`, headers: who.headers })
    t.equal(res.statusCode, 200, filter)
    return res.json().items.map((u: { id: number }) => u.id)
  }
  t.same(await ids('metadata.public.plan eq "pro"'), [ada.id])
  t.same(await ids('metadata.public.seats gt 10'), [bob.id])
  t.same(await ids('metadata.public.seats eq "5"'), [], 'a number is not a string')
  t.same(await ids('metadata.public.beta eq true'), [ada.id])
  t.same(await ids('metadata.public.tag eq "mixed"'), [], 'exact, case-sensitive')
  t.same(await ids('metadata.public.plan sw "fr" and metadata.public.seats ge 50'), [bob.id])
  t.same(await ids('metadata.public.beta pr'), [ada.id])
  t.same(await ids('metadata.private.tier eq "gold"'), [ada.id], 'an admin filters on private')
  t.same(await ids('metadata.public.plan eq "pro"', ada), [ada.id], 'a user sees at most itself')
  const refused = await app.inject({ method: 'GET', url: `/users?filter=${encodeURIComponent('metadata.private.tier eq "gold"')}`, headers: ada.headers })
  assertProblem(t, refused, 401, 'FORBIDDEN')
  const bad = await app.inject({ method: 'GET', url: `/users?filter=${encodeURIComponent('metadata.public.a$b eq 1')}`, headers: admin.headers })
  t.equal(bad.statusCode, 400)
})

t.test('imports and exports carry all three parts, and Auth0\'s', async (t) => {
  const app = await build(t, { url: await sharedDatabase(t), imports: { pollMs: 20 } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (!address || typeof address === 'string') throw new Error('not listening')
  const base = `http://127.0.0.1:${address.port}`
  const admin = await adminUser(app)
  const run = async (body: string, query: string, type: string) => {
    const res = await app.inject({ method: 'POST', url: `/imports${query}`, headers: { ...admin.headers, 'content-type': type }, payload: body })
    t.equal(res.statusCode, 202, res.body)
    for (let i = 0; i < 500; i++) {
      const imp = (await app.inject({ method: 'GET', url: `/imports/${res.json().id}`, headers: admin.headers })).json()
      if (imp.status === 'succeeded' || imp.status === 'failed') return imp
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    throw new Error('the import did not end')
  }
  const idOf = async (email: string) => (await app.inject({ method: 'GET', url: `/users/email/${email}`, headers: admin.headers })).json().id as number

  const line = { email: 'meta@example.com', metadata: { public: { plan: 'pro' }, private: { note: 'n' }, unsafe: { theme: 'dark' } } }
  t.match(await run(JSON.stringify(line) + '\n', '', 'application/x-ndjson'), { created: 1, failed: 0 })
  const id = await idOf('meta@example.com')
  t.same((await read(app, admin, id)).json(), { href: url(id), ...line.metadata })

  const update = { email: 'meta@example.com', metadata: { public: { plan: null, seats: 3 }, unsafe: { lang: 'fr' } } }
  t.match(await run(JSON.stringify(update) + '\n', '?on_conflict=update', 'application/x-ndjson'), { updated: 1 })
  t.same((await read(app, admin, id)).json(), { href: url(id), public: { seats: 3 }, private: { note: 'n' }, unsafe: { theme: 'dark', lang: 'fr' } }, 'merged')

  const auth0 = [{ email: 'zero@example.com', app_metadata: { roles: ['x'] }, user_metadata: { color: 'blue' } }]
  t.match(await run(JSON.stringify(auth0), '?format=auth0', 'application/json'), { created: 1, failed: 0 })
  const zero = await idOf('zero@example.com')
  t.same((await read(app, admin, zero)).json(), { href: url(zero), public: {}, private: { roles: ['x'] }, unsafe: { color: 'blue' } })

  const big = { email: 'big@example.com', metadata: { public: { x: 'y'.repeat(9000) } } }
  t.match(await run(JSON.stringify(big) + '\n', '', 'application/x-ndjson'), { failed: 1 })

  const lines = (await (await fetch(`${base}/exports/users`, { headers: admin.headers })).text()).trim().split('\n').map((l) => JSON.parse(l))
  const exported = lines.find((l) => l.emails[0].address === 'meta@example.com')
  t.same(exported.metadata, { public: { seats: 3 }, private: { note: 'n' }, unsafe: { theme: 'dark', lang: 'fr' } })
  t.same(lines.find((l) => l.emails[0].address === 'zero@example.com').metadata, { public: {}, private: { roles: ['x'] }, unsafe: { color: 'blue' } })
  t.same(lines.find((l) => l.emails[0].address === 'root@example.com').metadata, { public: {}, private: {}, unsafe: {} })
})
