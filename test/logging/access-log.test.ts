import t from 'tap'
import { build, login, ADMIN } from '../helpers.js'

t.test('a served request writes one access line, with the address redacted', async (t) => {
  const lines: string[] = []
  const app = await build(t, { env: { LOG_LEVEL: 'info' }, logStream: { write: (l) => { lines.push(l) } } })
  const token = await login(app, ADMIN.email, ADMIN.password)
  lines.length = 0
  const res = await app.inject({ method: 'GET', url: `/users/email/${encodeURIComponent(ADMIN.email)}`, headers: { authorization: `Bearer ${token}` } })
  t.equal(res.statusCode, 200)
  const access = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request')
  t.equal(access.length, 1, 'one line')
  t.match(access[0], {
    level: 30, method: 'GET', url: '/users/email/[redacted]', statusCode: 200, pid: process.pid,
    request_id: res.headers['x-request-id'], client: '127.0.0.1', user_id: res.json<{ id: number }>().id
  })
  t.notOk(lines.join('').includes(ADMIN.email), 'the address is in no line')
})

t.test('an anonymous request\'s access line has no user id', async (t) => {
  const lines: string[] = []
  const app = await build(t, { env: { LOG_LEVEL: 'info' }, logStream: { write: (l) => { lines.push(l) } } })
  const res = await app.inject({ method: 'GET', url: '/users/1', remoteAddress: '2001:db8::7', headers: { 'x-request-id': 'lb-1234' } })
  t.equal(res.statusCode, 401)
  const access = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request')
  t.match(access[0], { statusCode: 401, request_id: 'lb-1234', client: '2001:db8::/64' })
  t.notOk('user_id' in access[0]!, 'no user id')
})

t.test('a request refused before its route runs is logged with its code and detail, each key once', async (t) => {
  const lines: string[] = []
  const app = await build(t, { env: { LOG_LEVEL: 'info' }, logStream: { write: (l) => { lines.push(l) } } })
  const res = await app.inject({ method: 'POST', url: '/sessions', headers: { 'content-type': 'application/json' }, payload: '{"email":' })
  t.equal(res.statusCode, 400)
  const refused = lines.filter((l) => l.includes('"request refused"'))
  t.equal(refused.length, 1, 'one line')
  t.equal(refused[0]!.split('"msg":').length - 1, 1, 'one msg key: the detail is not written over')
  t.match(JSON.parse(refused[0]!), {
    level: 30, msg: 'request refused', request_id: res.headers['x-request-id'],
    code: 'FST_ERR_CTP_INVALID_JSON_BODY', detail: /not valid JSON/
  })
})
