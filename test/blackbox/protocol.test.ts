import net from 'node:net'
import t from 'tap'
import { ADMIN } from '../helpers.js'
import { assertRecovered, rawExchange, startBuilt, statusOf, type RunningService } from './service.js'

/**
 * The HTTP abuse catalogue of SECURITY.md against the built service over real sockets: many slow or idle
 * connections, pipelining, huge request lines and headers, malformed HTTP, method override oddities, bad UTF-8, and
 * the authorization matrix as a stranger would probe it. After each group the same process answers, with its
 * descriptors and memory back.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Opens `count` sockets, each started by `begin`; they stay open until `close()`. */
async function crowd(port: number, count: number, begin: (socket: net.Socket) => void) {
  const sockets: net.Socket[] = []
  await Promise.all(Array.from({ length: count }, () => new Promise<void>((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      begin(socket)
      resolve()
    })
    socket.on('error', () => resolve())
    sockets.push(socket)
  })))
  return { sockets, close: () => { for (const socket of sockets) socket.destroy() } }
}

/** The times (ms) of `n` sequential reads of /health/live by a well-behaved client. */
async function latencies(service: RunningService, n = 20): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const started = process.hrtime.bigint()
    const res = await fetch(`${service.base}/health/live`)
    await res.arrayBuffer()
    if (res.status !== 200) throw new Error(`health answered ${res.status}`)
    out.push(Number(process.hrtime.bigint() - started) / 1e6)
  }
  return out
}

async function signUp(service: RunningService, email: string) {
  const created = await fetch(`${service.base}/users`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Matrix', email, password: 'password-123' })
  })
  const user = (await created.json()) as { id: number }
  const login = await fetch(`${service.base}/auth/tokens`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'password-123' })
  })
  const body = (await login.json()) as { token: string; session: { id: number } }
  return { id: user.id, token: body.token, sessionId: body.session.id }
}

t.test('many slow, idle or dripping connections: others are served meanwhile, and everything is released', async (t) => {
  const service = await startBuilt(t, { RATE_LIMIT_MAX: '100000' })
  const baseline = service.usage()
  const before = median(await latencies(service))

  // 200 slowloris connections (headers a byte at a time), 200 idle keep-alive connections, 150 bodies dripped.
  const slowloris = await crowd(service.port, 200, (socket) => {
    socket.write('GET /health/live HTTP/1.1\r\nHost: roster\r\n')
    const timer = setInterval(() => { if (!socket.destroyed) socket.write('X') }, 1_000)
    socket.on('close', () => clearInterval(timer))
  })
  const idle = await crowd(service.port, 200, (socket) => socket.write('GET /health/live HTTP/1.1\r\nHost: roster\r\n\r\n'))
  const dripping = await crowd(service.port, 150, (socket) => {
    socket.write('POST /users HTTP/1.1\r\nHost: roster\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{')
    const timer = setInterval(() => { if (!socket.destroyed) socket.write(' ') }, 500)
    socket.on('close', () => clearInterval(timer))
  })
  await sleep(500)
  // Read before the others are served. The slowloris and dripping connections cannot end by themselves: the service
  // must hold all 350. The idle keep-alive ones may reach their timeout first on a loaded host, rightly closed.
  const held = service.usage().fds - baseline.fds
  const during = await latencies(service)
  t.ok(held >= 350, `the service holds the connections (${held} descriptors more than before)`)
  t.ok(median(during) < Math.max(50, before * 10), `others served in a median ${median(during).toFixed(1)} ms meanwhile (before: ${before.toFixed(1)} ms)`)
  slowloris.close()
  idle.close()
  dripping.close()
  await assertRecovered(t, service, baseline, 'after 550 slow and idle connections', { settleMs: 10_000 })
})

t.test('pipelining, huge request lines and headers, malformed HTTP, method overrides and bad UTF-8', async (t) => {
  const service = await startBuilt(t)
  const baseline = service.usage()
  const port = service.port

  // Three requests in one write: three answers, in order, on the one connection.
  const pipelined = await rawExchange(port, (socket) => socket.write(
    'GET /health/live HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\nGET /health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
  ))
  t.same([...pipelined.answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [200, 404, 200], 'pipelined: three answers in order')

  const cases: Array<[string, string, number[]]> = [
    ['a URL of 20 KB', `GET /users?name=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, [431]],
    ['a header of 20 KB', `GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`, [431]],
    ['5,000 short headers', `GET /health/live HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 5000 }, (_, i) => `X-H${i}: 1\r\n`).join('')}\r\n`, [431]],
    ['a request line that is not HTTP', 'HELLO\r\n\r\n', [400]],
    ['an unknown HTTP version', 'GET / HTTP/9.9\r\nHost: x\r\n\r\n', [400, 505]],
    ['both Content-Length and Transfer-Encoding', 'POST /users HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', [400]],
    ['two Content-Lengths', 'POST /users HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}', [400]],
    ['a bad chunk size', 'POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n', [400]],
    ['a NUL in a header', 'GET /health/live HTTP/1.1\r\nHost: x\r\nX-Evil: a\u0000b\r\n\r\n', [400]],
    ['a bare LF request', 'GET /health/live HTTP/1.1\nHost: x\n\n', [200, 400]],
    ['a Content-Length past what is sent, then silence', 'POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{}', [0, 408]],
    ['an absolute URL to another host', 'GET http://evil.example/health/live HTTP/1.1\r\nHost: x\r\n\r\n', [200, 400, 404]]
  ]
  const answers = await Promise.all(cases.map(([, request]) => rawExchange(port, (socket) => socket.write(request), 1_500)))
  for (const [i, [what, , statuses]] of cases.entries()) {
    const status = statusOf(answers[i]!.answer)
    t.ok(statuses.includes(status), `${what}: ${status} (expected ${statuses.join(' or ')})`)
    if (status >= 400) t.match(answers[i]!.answer, /application\/problem\+json/i, `${what}: as problem+json`)
  }

  // Method override oddities: only POST with PUT or DELETE is overridden, and then by the real route's own rules.
  const admin = (await (await fetch(`${service.base}/auth/tokens`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ADMIN)
  })).json()) as { token: string; user: { id: number } }
  const auth = { authorization: `Bearer ${admin.token}` }
  const override = async (method: string, value: string, path: string, body?: string) => {
    const res = await fetch(`${service.base}${path}`, {
      method, headers: { ...auth, 'x-http-method-override': value, ...(body ? { 'content-type': 'application/json' } : {}) }, body
    })
    await res.arrayBuffer()
    return res.status
  }
  t.equal(await override('POST', 'PUT', `/users/${admin.user.id}/name`, '{"name":"Root"}'), 200, 'POST as PUT: the PUT route')
  t.equal(await override('POST', ' put ', `/users/${admin.user.id}/name`, '{"name":"Root"}'), 200, 'spaces and letter case are forgiven')
  t.equal(await override('POST', 'GET', `/users/${admin.user.id}`), 405, 'POST as GET: not overridden, POST is not served there')
  t.equal(await override('POST', 'PATCH', `/users/${admin.user.id}/name`, '{"name":"Root"}'), 405, 'POST as PATCH: not overridden')
  t.equal(await override('GET', 'DELETE', `/users/${admin.user.id}`), 200, 'GET is never overridden')
  t.equal(await override('POST', 'DELETE, PUT', `/users/${admin.user.id}`), 405, 'a list is not a method')

  // Bad UTF-8 in every place it can go.
  const bad = Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]) // {"name":"\xff\xfe"}
  const badUtf8: Array<[string, string, Record<string, string>, Buffer | string]> = [
    ['a JSON body', `/users/${admin.user.id}/name`, { 'content-type': 'application/json' }, bad],
    ['a text body on a key path', `/users/${admin.user.id}/name`, { 'content-type': 'text/plain' }, Buffer.from([0xc3, 0x28])],
    ['a form', `/users/${admin.user.id}/name`, { 'content-type': 'application/x-www-form-urlencoded' }, 'name=%FF%FE'],
    ['a path', '/users/email/%FF%FE', {}, '']
  ]
  for (const [what, path, headers, body] of badUtf8) {
    const res = await fetch(`${service.base}${path}`, { method: body === '' ? 'GET' : 'PUT', headers: { ...auth, ...headers }, body: body === '' ? undefined : body })
    const text = await res.text()
    t.ok(res.status >= 400 && res.status < 500, `bad UTF-8 in ${what}: ${res.status}`)
    t.match(res.headers.get('content-type') ?? '', /problem\+json/, `bad UTF-8 in ${what}: as problem+json (${text.slice(0, 80)})`)
  }
  await assertRecovered(t, service, baseline, 'after the protocol catalogue')
  t.notOk(service.lines.some((l) => /"level":(50|60)/.test(l)), 'no error in the log')
})

t.test('a stranger probing other users: every request refused, nothing changed', async (t) => {
  const service = await startBuilt(t)
  const victim = await signUp(service, 'victim@example.com')
  const stranger = await signUp(service, 'stranger@example.com')
  const emails = (await (await fetch(`${service.base}/users/${victim.id}/emails`, { headers: { authorization: `Bearer ${victim.token}` } })).json()) as { items: Array<{ id: number }> }
  const emailId = emails.items[0]!.id
  const v = victim.id
  const probes: Array<[string, string, string | undefined, Record<string, string>?]> = [
    ['GET', `/users/${v}`, undefined], ['GET', '/users/email/victim@example.com', undefined], ['GET', `/users/${v}/emails`, undefined],
    ['GET', `/users/${v}/emails/${emailId}`, undefined], ['GET', `/users/${v}/email`, undefined], ['GET', `/users/${v}/sessions`, undefined],
    ['PUT', `/users/${v}/name`, '{"name":"Owned"}'], ['PUT', `/users/${v}/password`, '{"password":"owned-password-1"}'],
    ['PUT', `/users/${v}/status`, '{"status":"BANNED"}'], ['PUT', `/users/${v}/role`, '{"role":"admin"}'],
    ['PUT', `/users/${v}/email`, '{"email":"owned@example.com"}'], ['POST', `/users/${v}/emails`, '{"address":"owned@example.com"}'],
    ['PUT', `/users/${v}/emails/${emailId}`, '{"address":"owned@example.com"}'], ['DELETE', `/users/${v}/emails/${emailId}`, undefined],
    ['DELETE', `/users/${v}/email`, undefined], ['DELETE', `/users/${v}/sessions`, undefined],
    ['DELETE', `/users/${v}/sessions/${victim.sessionId}`, undefined], ['DELETE', `/users/${v}`, undefined],
    ['POST', `/users/${v}/emails/${emailId}/verification`, undefined],
    // Self-promotion, in every encoding and through the override.
    ['PUT', `/users/${stranger.id}/role`, '{"role":"admin"}'], ['PUT', `/users/${stranger.id}/status`, '{"status":"ACTIVE"}'],
    ['PUT', `/users/${stranger.id}/role`, 'admin', { 'content-type': 'text/plain' }],
    ['PUT', `/users/${stranger.id}/role`, 'role=admin', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['POST', `/users/${stranger.id}/role`, '{"role":"admin"}', { 'x-http-method-override': 'PUT' }],
    ['POST', `/users/${v}`, undefined, { 'x-http-method-override': 'DELETE' }],
    ['POST', `/users/${v}/name`, '{"name":"Owned"}', { 'x-http-method-override': 'PUT' }]
  ]
  for (const [method, path, body, extra] of probes) {
    const headers: Record<string, string> = { authorization: `Bearer ${stranger.token}`, ...(body?.startsWith('{') ? { 'content-type': 'application/json' } : {}), ...extra }
    const res = await fetch(`${service.base}${path}`, { method, headers, body })
    const problem = (await res.json()) as { code?: string }
    t.equal(res.status, 401, `${method} ${path}${extra ? ` (${JSON.stringify(extra)})` : ''}: 401`)
    t.equal(problem.code, 'FORBIDDEN', `${method} ${path}: FORBIDDEN`)
  }
  const self = (await (await fetch(`${service.base}/users/${v}`, { headers: { authorization: `Bearer ${victim.token}` } })).json()) as Record<string, unknown>
  t.match(self, { name: 'Matrix', email: 'victim@example.com', status: 'ACTIVE', role: 'user' }, 'the victim is as it was')
  const me = (await (await fetch(`${service.base}/users/${stranger.id}`, { headers: { authorization: `Bearer ${stranger.token}` } })).json()) as Record<string, unknown>
  t.equal(me.role, 'user', 'the stranger is still a plain user')
})
