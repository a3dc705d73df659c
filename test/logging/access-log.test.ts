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
  t.match(access[0], { level: 30, method: 'GET', url: '/users/email/[redacted]', statusCode: 200, reqId: String, pid: process.pid })
  t.notOk(lines.join('').includes(ADMIN.email), 'the address is in no line')
})
