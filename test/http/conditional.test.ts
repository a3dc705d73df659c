import t from 'tap'
import { adminUser, assertProblem, build, newUser } from '../helpers.js'

t.test('ETag and If-None-Match on single resources and collections', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  for (const url of [`/users/${user.id}`, '/users', `/users/${user.id}/emails`, `/users/${user.id}/email`, '/users?name=user*']) {
    const first = await app.inject({ url, headers: admin.headers })
    t.equal(first.statusCode, 200)
    const etag = first.headers.etag as string
    t.match(etag, /^"[^"]+"$/, `${url}: strong ETag`)
    const again = await app.inject({ url, headers: { ...admin.headers, 'if-none-match': etag } })
    t.equal(again.statusCode, 304, `${url}: 304`)
    t.equal(again.body, '', `${url}: no body`)
    t.equal(again.headers.etag, etag)
    const weak = await app.inject({ url, headers: { ...admin.headers, 'if-none-match': `"other", W/${etag}` } })
    t.equal(weak.statusCode, 304, `${url}: weak comparison, list`)
    const stale = await app.inject({ url, headers: { ...admin.headers, 'if-none-match': '"stale"' } })
    t.equal(stale.statusCode, 200, `${url}: another tag gets the body`)
  }
  const before = (await app.inject({ url: '/users', headers: admin.headers })).headers.etag
  await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: 'Changed' } })
  const after = await app.inject({ url: '/users', headers: { ...admin.headers, 'if-none-match': before as string } })
  t.equal(after.statusCode, 200, 'a changed collection is sent again')
})

t.test('If-Match stops lost updates and writes nothing', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const read = await app.inject({ url: `/users/${user.id}`, headers: user.headers })
  const etag = read.headers.etag as string

  const first = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...user.headers, 'if-match': etag }, payload: { name: 'First' } })
  t.equal(first.statusCode, 200)
  t.not(first.headers.etag, etag, 'new version, new tag')
  const second = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...admin.headers, 'if-match': etag }, payload: { name: 'Second' } })
  assertProblem(t, second, 412, 'PRECONDITION_FAILED', 'the second writer read a stale version')
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json().name, 'First', 'the first write stands')

  const garbage = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...user.headers, 'if-match': 'garbage' }, payload: { name: 'G' } })
  assertProblem(t, garbage, 412, 'PRECONDITION_FAILED', 'a tag that is not ours')
  const star = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...user.headers, 'if-match': '*' }, payload: { name: 'Star' } })
  t.equal(star.statusCode, 200, '* matches any current version')
  const list = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...user.headers, 'if-match': `"v1", ${star.headers.etag}` }, payload: { name: 'Listed' } })
  t.equal(list.statusCode, 200, 'one of a list')

  const del = await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: { ...user.headers, 'if-match': etag } })
  assertProblem(t, del, 412, 'PRECONDITION_FAILED', 'stale delete')
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode, 200, 'still there')
  const missing = await app.inject({ method: 'PUT', url: '/users/999999/name', headers: { ...admin.headers, 'if-match': '"v1"' }, payload: { name: 'X' } })
  assertProblem(t, missing, 404, 'USER_NOT_FOUND', 'a missing user is 404, not 412')
})

t.test('If-Match on addresses', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const primary = await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })
  const etag = primary.headers.etag as string
  const put = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: { ...user.headers, 'if-match': etag }, payload: { email: 'one@example.com' } })
  t.equal(put.statusCode, 200)
  const stale = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${primary.json().id}`, headers: { ...user.headers, 'if-match': etag }, payload: { address: 'two@example.com' } })
  assertProblem(t, stale, 412, 'PRECONDITION_FAILED')
  const second = (await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'three@example.com' } })).json()
  const staleDelete = await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${second.id}`, headers: { ...user.headers, 'if-match': '"v9"' } })
  assertProblem(t, staleDelete, 412, 'PRECONDITION_FAILED')
  t.equal((await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })).json().address, 'one@example.com')
  t.equal((await app.inject({ url: `/users/${user.id}/emails/${second.id}`, headers: user.headers })).statusCode, 200, 'not deleted')
})
