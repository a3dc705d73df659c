import t from 'tap'
import { bearer, build, login, ADMIN } from '../helpers.js'

/** Request ids: every answer carries one, the client's own when it is fit to be taken, and problem bodies repeat it. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('an answer carries an id of the service\'s own, a new one each time', async (t) => {
  const app = await build(t)
  const first = await app.inject({ method: 'GET', url: '/health/live' })
  const second = await app.inject({ method: 'GET', url: '/health/live' })
  t.match(first.headers['x-request-id'], UUID, 'a random UUID')
  t.match(second.headers['x-request-id'], UUID)
  t.not(first.headers['x-request-id'], second.headers['x-request-id'], 'not the same twice')
})

t.test('a client\'s own id is taken as it is, on success and on every kind of problem', async (t) => {
  const app = await build(t)
  const token = await login(app, ADMIN.email, ADMIN.password)
  const id = 'app-7f3a:req.42_x'
  const ok = await app.inject({ method: 'GET', url: '/users/1', headers: { ...bearer(token), 'x-request-id': id } })
  t.equal(ok.statusCode, 200)
  t.equal(ok.headers['x-request-id'], id, 'echoed on success')
  const problems: Array<{ method: 'GET' | 'POST'; url: string; headers?: Record<string, string>; payload?: string }> = [
    { method: 'GET', url: '/users/999999', headers: bearer(token) }, // a domain error
    { method: 'GET', url: '/nowhere' }, // no route
    { method: 'GET', url: '/users/1' }, // unauthenticated
    { method: 'GET', url: '/users/%E0%A4%A' }, // a URL the router cannot decode
    { method: 'POST', url: '/users', payload: '{"name":', headers: { 'content-type': 'application/json' } } // a body that does not parse
  ]
  for (const request of problems) {
    const res = await app.inject({ ...request, headers: { ...request.headers, 'x-request-id': id } })
    t.ok(res.statusCode >= 400 && res.statusCode < 500, `${request.method} ${request.url}: ${res.statusCode}`)
    t.equal(res.headers['x-request-id'], id, `${request.url}: in the header`)
    t.equal(res.json().request_id, id, `${request.url}: in the problem body`)
  }
})

t.test('an id not fit to be taken is replaced, never echoed', async (t) => {
  const app = await build(t)
  for (const sent of ['a'.repeat(129), 'has space', 'semi;colon', '', 'ü', '<script>']) {
    const res = await app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': sent } })
    t.match(res.headers['x-request-id'], UUID, `${JSON.stringify(sent.slice(0, 20))} replaced`)
    t.equal(res.json().request_id, res.headers['x-request-id'])
  }
  const longest = 'b'.repeat(128)
  t.equal((await app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': longest } })).headers['x-request-id'], longest, '128 characters are taken')
})
