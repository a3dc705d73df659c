import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, newUser, sharedDatabase, type TestUser } from '../helpers.js'

async function list(app: App, admin: TestUser, query: string) {
  const res = await app.inject({ url: `/users?${query}`, headers: admin.headers })
  return res
}
const names = (res: { json: () => { items: Array<{ name: string }> } }) => res.json().items.map((u) => u.name).sort()

t.test('filters', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const ada = await newUser(app, { name: 'Ada Lovelace', email: 'ada@example.com' })
  const adam = await newUser(app, { name: 'ADAM Smith', email: 'adam@example.com' })
  const nevada = await newUser(app, { name: 'Nevada', email: 'nv@example.com' })
  await newUser(app, { name: '100% Real', email: 'pct@example.com' })
  await newUser(app, { name: '100x Real', email: 'x@example.com' })
  await newUser(app, { name: 'snake_case', email: 'snake@example.com' })
  await newUser(app, { name: 'snakeXcase', email: 'snakex@example.com' })
  await newUser(app, { name: 'back\\slash', email: 'bs@example.com' })
  await newUser(app, { name: 'a*b', email: 'star@example.com' })
  await app.inject({ method: 'POST', url: `/users/${ada.id}/emails`, headers: ada.headers, payload: { address: 'Countess@Example.org' } })
  await app.inject({ method: 'PUT', url: `/users/${nevada.id}/status`, headers: admin.headers, payload: { status: 'BANNED' } })

  t.same(names(await list(app, admin, 'name=ada')), [], 'exact: no user is named just "ada"')
  t.same(names(await list(app, admin, 'name=nevada')), ['Nevada'], 'exact, case-insensitive')
  t.same(names(await list(app, admin, 'name=ada*')), ['ADAM Smith', 'Ada Lovelace'], 'prefix, case-insensitive')
  t.same(names(await list(app, admin, 'name=*ada')), ['Nevada'], 'suffix')
  t.same(names(await list(app, admin, 'name=*ADA*')), ['ADAM Smith', 'Ada Lovelace', 'Nevada'], 'anywhere')
  t.same(names(await list(app, admin, 'name=100%25*')), ['100% Real'], '% is a plain character')
  t.same(names(await list(app, admin, 'name=snake_*')), ['snake_case'], '_ is a plain character')
  t.same(names(await list(app, admin, 'name=*k\\s*')), ['back\\slash'], '\\ is a plain character')
  t.same(names(await list(app, admin, 'name=*!*')), [], 'the escape character is a plain character too')

  for (const bad of ['a*b', '*', '**', '***', 'a**', '*a*b*']) {
    assertProblem(t, await list(app, admin, `name=${encodeURIComponent(bad)}`), 400, 'INVALID_FILTER', `name=${bad}`)
  }

  t.same(names(await list(app, admin, 'email=COUNTESS%40example.org')), ['Ada Lovelace'], 'email: any address, any case')
  t.same(names(await list(app, admin, 'email=nobody%40example.org')), [], 'email: no match is an empty collection')
  t.same(names(await list(app, admin, 'status=BANNED')), ['Nevada'])
  t.same(names(await list(app, admin, `id=${ada.id}&id=${nevada.id}&id=${ada.id}`)), ['Ada Lovelace', 'Nevada'], 'repeatable id')
  t.same(names(await list(app, admin, 'name=*ada*&status=ACTIVE')), ['ADAM Smith', 'Ada Lovelace'], 'filters combine with AND')
  t.same(names(await list(app, admin, `name=ada*&id=${adam.id}`)), ['ADAM Smith'])

  const one = await list(app, admin, `id=${ada.id}`)
  t.equal(one.statusCode, 200)
  t.same(Object.keys(one.json()).sort(), ['href', 'items', 'next'], 'one match is still a collection')
  t.equal(one.json().items[0].href, `/users/${ada.id}`, 'each item carries its href')
  t.equal(one.json().href, `/users?id=${ada.id}&limit=50`)
  t.equal(one.json().next, null)
  t.notOk(one.headers.link, 'no Link on the last page')
})

t.test('bad queries are 400 and never widen the result', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  for (const q of ['nmae=ada', 'limit=0', 'limit=201', 'limit=ten', 'status=banned', 'id=0', 'id=01', 'id=1e0', 'id=abc', 'email=', 'foo=bar&name=ada', `id=${'9'.repeat(309)}`, 'id=9007199254740992',
    Array.from({ length: 101 }, (_, i) => `id=${i + 1}`).join('&')]) {
    assertProblem(t, await list(app, admin, q), 400, 'VALIDATION_FAILED', q.slice(0, 40))
  }
  t.equal((await list(app, admin, Array.from({ length: 100 }, (_, i) => `id=${i + 1}`).join('&'))).statusCode, 200, '100 ids are fine')
})

t.test('a plain user sees at most itself', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { name: 'Plain Jane' })
  await newUser(app, { name: 'Plain John' })
  const all = await app.inject({ url: '/users', headers: user.headers })
  t.same(all.json().items.map((u: { id: number }) => u.id), [user.id])
  const others = await app.inject({ url: '/users?name=plain*', headers: user.headers })
  t.same(others.json().items.map((u: { id: number }) => u.id), [user.id])
  const nobody = await app.inject({ url: '/users?name=*john', headers: user.headers })
  t.same(nobody.json().items, [])
  assertProblem(t, await app.inject({ url: '/users' }), 401, 'UNAUTHENTICATED', 'anonymous')
})

t.test('keyset paging across three pages while users are added', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  for (let i = 0; i < 7; i++) await newUser(app, { name: `Pager ${i}` })
  const initial = (await list(app, admin, 'limit=200')).json().items.map((u: { id: number }) => u.id)
  t.equal(initial.length, 8)

  const seen: number[] = []
  let next: string | null = '/users?limit=3'
  let pages = 0
  while (next) {
    const res: { statusCode: number; headers: Record<string, unknown>; json: () => { items: Array<{ id: number }>; next: string | null } } =
      await app.inject({ url: next, headers: admin.headers })
    t.equal(res.statusCode, 200)
    const body = res.json()
    if (body.next) t.equal(res.headers.link, `<${body.next}>; rel="next"`)
    seen.push(...body.items.map((u: { id: number }) => u.id))
    next = body.next
    pages++
    if (pages <= 2) await newUser(app, { name: `Late ${pages}` }) // added between page fetches
  }
  t.equal(new Set(seen).size, seen.length, 'no user repeated')
  for (const id of initial) t.ok(seen.includes(id), `user ${id} not skipped`)
  t.same(seen, [...seen].sort((a, b) => a - b), 'ordered by id')
  t.ok(pages >= 3, `${pages} pages`)
  t.equal(seen.length, 10, 'users added meanwhile come on later pages')
})

t.test('cursors are opaque, tamper-evident and bound to their filters', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  for (let i = 0; i < 4; i++) await newUser(app, { name: `Cursor ${i}` })
  const first = (await list(app, admin, 'name=cursor*&limit=2')).json()
  const cursor = new URL(first.next, 'http://x').searchParams.get('cursor')!
  t.equal((await list(app, admin, `name=cursor*&limit=2&cursor=${cursor}`)).statusCode, 200)
  t.equal((await list(app, admin, `name=cursor*&limit=3&cursor=${cursor}`)).statusCode, 200, 'the page size may change')
  assertProblem(t, await list(app, admin, `name=other*&limit=2&cursor=${cursor}`), 400, 'INVALID_CURSOR', 'other filters')
  const [payload, mac] = cursor.split('.')
  const forged = Buffer.from(Buffer.from(payload!, 'base64url').toString().replace(/^\d+/, '1')).toString('base64url')
  assertProblem(t, await list(app, admin, `name=cursor*&limit=2&cursor=${forged}.${mac}`), 400, 'INVALID_CURSOR', 'forged')
  assertProblem(t, await list(app, admin, 'cursor=garbage'), 400, 'INVALID_CURSOR', 'garbage')
})

t.test('cursors stay valid across instances on the same database', async (t) => {
  const url = await sharedDatabase(t)
  {
    const one = await build(t, { url })
    const admin = await adminUser(one)
    for (let i = 0; i < 3; i++) await newUser(one)
    const next = (await list(one, admin, 'limit=2')).json().next
    const two = await build(t, { url })
    const res = await two.inject({ url: next, headers: admin.headers })
    t.equal(res.statusCode, 200, 'a cursor from one instance works on another')
  }
})
