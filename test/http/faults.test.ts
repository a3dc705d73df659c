import net from 'node:net'
import t, { type Test } from 'tap'
import { assertProblem, build, ENGINE, freshDatabase, MYSQL_URL, newUser } from '../helpers.js'

/**
 * A TCP proxy in front of MySQL that a test can cut and restore, as a network outage would, or freeze and thaw, as a
 * hung server would (`kill -STOP`): connections stay open and nothing passes either way.
 */
async function mysqlProxy() {
  const target = new URL(MYSQL_URL)
  const sockets = new Set<net.Socket>()
  let frozen = false
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 3306), target.hostname)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
    if (frozen) { client.pause(); upstream.pause() }
  })
  const listen = (port: number) => new Promise<number>((resolve) => server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)))
  const port = await listen(0)
  return {
    port,
    async cut() {
      await new Promise<void>((resolve) => { server.close(() => resolve()); for (const s of sockets) s.destroy() })
    },
    async restore() { await listen(port) },
    freeze() { frozen = true; for (const s of sockets) s.pause() },
    thaw() { frozen = false; for (const s of sockets) s.resume() },
    async close() { for (const s of sockets) s.destroy(); server.close() }
  }
}

/** A fresh MySQL database reached through a proxy of its own: the database's URL through the proxy, and the proxy. */
async function proxiedDatabase(t: Test) {
  const db = await freshDatabase()
  t.teardown(db.drop)
  const proxy = await mysqlProxy()
  t.teardown(() => proxy.close())
  const url = new URL(db.url)
  url.host = `127.0.0.1:${proxy.port}`
  return { url: url.toString(), proxy }
}

t.test('the database going away answers 503, never a hang or a 500, and the service recovers by itself', { skip: ENGINE !== 'mysql' && 'needs a networked database' }, async (t) => {
  const { url, proxy } = await proxiedDatabase(t)
  const app = await build(t, { url, env: { DB_POOL_SIZE: '4' } })
  const user = await newUser(app)
  const self = () => app.inject({ url: `/users/${user.id}`, headers: user.headers })
  t.equal((await self()).statusCode, 200, 'before')

  const acknowledged = (await app.inject({ method: 'POST', url: '/users', payload: { name: 'B', email: 'before-cut@example.com', password: 'password-1' } })).statusCode === 201 ? 1 : 0
  await proxy.cut()
  const started = Date.now()
  const during = await Promise.all([self(), self(), app.inject('/health/ready'), app.inject({ method: 'POST', url: '/users', payload: { name: 'X', email: 'x@example.com', password: 'password-1' } })])
  const firstAnswer = Date.now() - started
  for (const res of during) assertProblem(t, res, 503, 'UNAVAILABLE', 'during the outage')
  t.ok(during.every((r) => r.headers['retry-after']), 'with Retry-After')
  t.ok(firstAnswer < 8000, `answered in ${firstAnswer} ms`)
  t.equal((await app.inject('/health/live')).statusCode, 200, 'the process itself is alive')

  await proxy.restore()
  const restoredAt = Date.now()
  let recovered = false
  for (let i = 0; i < 50 && !recovered; i++) {
    recovered = (await self()).statusCode === 200
    if (!recovered) await new Promise((r) => setTimeout(r, 100))
  }
  const recoveredIn = Date.now() - restoredAt
  t.ok(recovered, 'after the outage, requests succeed again')
  t.equal((await app.inject('/health/ready')).statusCode, 200)
  const rows = await app.db.selectFrom('emails').select('id').where('address_norm', '=', 'x@example.com').execute()
  t.equal(rows.length, 0, 'the refused sign-up wrote nothing')
  const kept = await app.db.selectFrom('emails').select('id').where('address_norm', '=', 'before-cut@example.com').execute()
  t.equal(kept.length, acknowledged, 'the acknowledged write is there: none lost')
  t.comment(`database cut: four requests answered 503 in ${firstAnswer} ms, recovered ${recoveredIn} ms after the network returned, 0 acknowledged writes lost`)
})

t.test('a saturated pool sheds load with 503 instead of queueing without bound', { skip: ENGINE !== 'mysql' && 'the embedded engine has no pool' }, async (t) => {
  const app = await build(t, { env: { DB_POOL_SIZE: '1', DB_QUEUE_LIMIT: '1' } })
  // The background work (mail, events) would take the one connection too: only the requests compete here.
  await app.outbox.stop()
  await app.sequencer.stop()
  const user = await newUser(app)
  const results = await Promise.all(Array.from({ length: 30 }, () => app.inject({ url: '/users', headers: user.headers })))
  const codes = results.map((r) => r.statusCode)
  t.ok(codes.every((c) => c === 200 || c === 503), codes.join(','))
  t.ok(codes.includes(503), 'some requests were shed')
  for (const r of results.filter((r) => r.statusCode === 503)) assertProblem(t, r, 503, 'UNAVAILABLE')
  t.equal((await app.inject({ url: '/users', headers: user.headers })).statusCode, 200, 'and it serves again once the burst is over')
})

t.test('a lagging event loop sheds load with 503 and Retry-After', async (t) => {
  // A sustained lag, as under overload: the loop is kept busy 80 ms at a time, so every 250 ms window of the
  // monitor averages well over the 20 ms threshold, however busy or idle the machine otherwise is.
  const app = await build(t, { env: { MAX_EVENT_LOOP_DELAY_MS: '20' } })
  const busy = setInterval(() => {
    const start = Date.now()
    while (Date.now() - start < 80) { /* the event loop is stuck */ }
  }, 20)
  let shed
  let live
  try {
    const deadline = Date.now() + 10_000
    while (!shed && Date.now() < deadline) {
      const res = await app.inject('/health/ready')
      if (res.statusCode === 503) shed = res
      else await new Promise((r) => setTimeout(r, 10)) // an injected request may never yield to the timers
    }
    live = await app.inject('/health/live')
  } finally {
    clearInterval(busy)
  }
  t.ok(shed, 'a request was shed')
  if (shed) {
    assertProblem(t, shed, 503, 'UNAVAILABLE')
    t.equal(shed.headers['retry-after'], '2')
  }
  t.equal(live.statusCode, 200, 'liveness stays 200 while the loop lags')
  let back = false
  for (let i = 0; i < 60 && !back; i++) {
    back = (await app.inject('/health/ready')).statusCode === 200
    if (!back) await new Promise((r) => setTimeout(r, 100))
  }
  t.ok(back, 'recovers once the loop is free')
})

t.test('the deadlines of a slow client', { jobs: 2 }, async (t) => {
  t.test('a connection that stalls mid-request is closed after the connection timeout, without an answer', async (t) => {
    const app = await build(t)
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as net.AddressInfo
    const started = Date.now()
    const socket = net.connect(port, '127.0.0.1', () => socket.write('GET /health/live HTTP/1.1\r\nHost: roster\r\n'))
    let received = ''
    socket.on('data', (d: Buffer) => { received += d.toString() })
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - started)))
    t.equal((await fetch(`http://127.0.0.1:${port}/health/live`)).status, 200, 'the service answers others meanwhile')
    const closedAfter = await closed
    t.ok(closedAfter >= 9_000 && closedAfter < 15_000, `closed after ${closedAfter} ms (connectionTimeout 10 s)`)
    t.equal(received, '', 'no answer to the unfinished request')
  })

  t.test('a body dripped a byte at a time is answered 408 within the body deadline', async (t) => {
    const app = await build(t)
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as net.AddressInfo
    const drip = (contentType: string) => new Promise<{ answer: string; ms: number }>((resolve) => {
      const started = Date.now()
      let answer = ''
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write(`POST /users HTTP/1.1\r\nHost: x\r\nContent-Type: ${contentType}\r\nContent-Length: 1000\r\n\r\n{`)
      })
      const timer = setInterval(() => socket.write(' '), 1000)
      socket.on('data', (d: Buffer) => { answer += d.toString() })
      socket.on('close', () => { clearInterval(timer); resolve({ answer, ms: Date.now() - started }) })
      socket.on('error', () => {})
    })
    const [json, form] = await Promise.all([drip('application/json'), drip('multipart/form-data; boundary=x')])
    t.match(json.answer, /^HTTP\/1.1 408 /, 'a dripped JSON body: 408')
    t.match(json.answer, /"code":"REQUEST_TIMEOUT"/, 'as problem+json')
    t.ok(json.ms >= 9_500 && json.ms < 14_000, `after ${json.ms} ms`)
    t.ok(form.ms < 14_000, `a dripped multipart body: the connection closed after ${form.ms} ms`)
  })
})

t.test('malformed HTTP is answered as problem+json too', async (t) => {
  const app = await build(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as net.AddressInfo
  const raw = (request: string) => new Promise<string>((resolve) => {
    let answer = ''
    const socket = net.connect(port, '127.0.0.1', () => socket.write(request))
    socket.on('data', (d: Buffer) => { answer += d.toString() })
    socket.on('close', () => resolve(answer))
    socket.on('error', () => resolve(answer))
  })
  const cases: Array<[string, string, number, string]> = [
    ['both Content-Length and Transfer-Encoding', 'POST /users HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'BAD_REQUEST'],
    ['a NUL in a header', 'GET /health/live HTTP/1.1\r\nHost: x\r\nX-Evil: a\u0000b\r\n\r\n', 400, 'BAD_REQUEST'],
    ['a folded header', 'GET /health/live HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n', 400, 'BAD_REQUEST'],
    ['a URL over 16 KiB', `GET /users?name=${'a'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, 'HEADERS_TOO_LARGE']
  ]
  for (const [name, request, status, code] of cases) {
    const answer = await raw(request)
    t.match(answer, new RegExp(`^HTTP/1.1 ${status} `), `${name}: ${status}`)
    t.match(answer, /\r\nContent-Type: application\/problem\+json\r\n/i, `${name}: problem+json`)
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))
    t.match(body, { status, code, type: 'about:blank' }, `${name}: the contract's body`)
    const header = /\r\nX-Request-Id: ([^\r]+)\r\n/i.exec(answer)?.[1]
    t.match(header, /^[0-9a-f-]{36}$/, `${name}: an id of the service's own`)
    t.equal(body.request_id, header, `${name}: the same id in the body`)
  }
})

t.test('a hung database answers 503 within the deadline, logs the outage once, and the service recovers by itself', { skip: ENGINE !== 'mysql' && 'needs a networked database' }, async (t) => {
  const { url, proxy } = await proxiedDatabase(t)
  const lines: Array<{ level: number; msg: string; refused?: number }> = []
  const { buildApp } = await import('../../src/app.js')
  const { loadConfig } = await import('../../src/config.js')
  const app = await buildApp(loadConfig({
    DATABASE_URL: url, LOG_LEVEL: 'warn', DB_POOL_SIZE: '4', DB_TIMEOUT_MS: '1500', RATE_LIMIT_MAX: '100000000', MAX_EVENT_LOOP_DELAY_MS: '0'
  }), { logStream: { write: (line: string) => { lines.push(JSON.parse(line)) } } })
  t.teardown(() => app.close())
  await app.ready()
  const user = await newUser(app)
  const self = () => app.inject({ url: `/users/${user.id}`, headers: user.headers })
  const signup = (email: string) => app.inject({ method: 'POST', url: '/users', payload: { name: 'W', email, password: 'password-123' } })
  t.equal((await self()).statusCode, 200, 'before')
  const acknowledged: string[] = []
  if ((await signup('before@example.com')).statusCode === 201) acknowledged.push('before@example.com')

  proxy.freeze()
  const frozenAt = Date.now()
  const during = await Promise.all([
    ...Array.from({ length: 30 }, () => self()),
    app.inject('/health/ready'),
    signup('during@example.com')
  ])
  const firstAnswer = Date.now() - frozenAt
  for (const res of during) assertProblem(t, res, 503, 'UNAVAILABLE', 'while the database hangs')
  t.ok(firstAnswer < 3500, `every request answered 503 within ${firstAnswer} ms (deadline 1500 ms)`)
  t.equal((await app.inject('/health/live')).statusCode, 200, 'the process itself is alive')

  proxy.thaw()
  const thawedAt = Date.now()
  let recovered = false
  while (!recovered && Date.now() - thawedAt < 15_000) {
    recovered = (await self()).statusCode === 200
    if (!recovered) await new Promise((r) => setTimeout(r, 100))
  }
  const recoveredIn = Date.now() - thawedAt
  t.ok(recovered, `requests succeed again ${recoveredIn} ms after the database does`)
  if ((await signup('after@example.com')).statusCode === 201) acknowledged.push('after@example.com')
  const stored = await app.db.selectFrom('emails').select('address').where('address', 'in', acknowledged).execute()
  t.equal(stored.length, acknowledged.length, `every acknowledged write is stored (${acknowledged.length}): none lost`)
  await new Promise((r) => setTimeout(r, 1200)) // the outage log's probe
  const errors = lines.filter((l) => l.level >= 50)
  t.same(errors.map((l) => l.msg), ['database unavailable: answering 503 until it is back'], 'one error line for 32 refused requests')
  t.ok(lines.some((l) => l.msg === 'database available again'), 'and one line when it is back')
  t.comment(`hung database: first 503 after ${firstAnswer} ms, recovered ${recoveredIn} ms after the thaw, ${acknowledged.length} acknowledged writes, 0 lost`)
})
