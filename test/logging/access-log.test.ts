import { hostname } from 'node:os'
import t from 'tap'
import pino from 'pino'
import { accessLineRenderer, loggedUrl } from '../../src/logging/access-log.js'
import { build, login, ADMIN } from '../helpers.js'

t.test('the hand-built access line is the line pino would write, field for field and in order', async (t) => {
  const written: string[] = []
  const base = { pid: process.pid, hostname: hostname() }
  const logger = pino({ level: 'info', base, redact: { paths: ['req.headers.authorization'], censor: '[redacted]' } }, { write: (l: string) => { written.push(l) } })
  const render = accessLineRenderer(base)
  const cases: Array<[string, string, number, number]> = [
    ['GET', '/users/42', 200, 1.5],
    ['PUT', '/users/42/name?x="quoted"&y=\\back\u2028', 412, 0],
    ['GET', '/users/email/ada%40example.com', 404, 12.3],
    ['DELETE', '/users?email=ADA@example.com&name=a*', 401, 3]
  ]
  for (const [method, url, statusCode, ms] of cases) {
    written.length = 0
    logger.child({ reqId: 'req-7' }).info({ method, url: loggedUrl(url), statusCode, ms }, 'request')
    const fromPino = written[0]!
    const time = (JSON.parse(fromPino) as { time: number }).time
    t.equal(render(time, 'req-7', method, url, statusCode, ms), fromPino, `${method} ${url}`)
  }
})

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
