import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { MemoryCounter } from '../../src/limits/counters.js'
import { ADMIN, assertProblem, build, newUser, sharedDatabase } from '../helpers.js'

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

async function redisReachable(): Promise<boolean> {
  const probe = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on('error', () => {})
  try {
    await probe.connect()
    await probe.ping()
    return true
  } catch {
    return false
  } finally {
    probe.disconnect()
  }
}

const login = (app: App, email: string, password: string, extra: { remoteAddress?: string; headers?: Record<string, string> } = {}) =>
  app.inject({ method: 'POST', url: '/auth/tokens', payload: { email, password }, ...extra })

/** The login guard, on whichever store the apps were built with. `apps` share one store when there are two. */
async function loginGuard(t: Test, apps: [App, App]) {
  const [a, b] = apps
  const user = await newUser(a, { email: `guard.${randomBytes(3).toString('hex')}@example.com`, password: 'right-password' })
  for (let i = 0; i < 3; i++) {
    assertProblem(t, await login(a, user.email, 'wrong-password'), 401, 'INVALID_CREDENTIALS', `failure ${i + 1}`)
  }
  const blocked = await login(b, user.email, 'right-password')
  assertProblem(t, blocked, 429, 'RATE_LIMITED', 'the account is locked, even for the right password')
  const retry = Number(blocked.headers['retry-after'])
  t.ok(retry > 0 && retry <= 60, `Retry-After ${retry}`)
  assertProblem(t, await login(a, user.email.toUpperCase(), 'right-password'), 429, 'RATE_LIMITED', 'in any case of the address')
  const other = await newUser(a, { password: 'other-password' })
  t.equal((await login(b, other.email, 'other-password')).statusCode, 201, 'other accounts are not affected')
}

t.test('failed logins are limited per account (memory)', async (t) => {
  const app = await build(t, { env: { LOGIN_MAX_FAILURES: '3', LOGIN_WINDOW_SECONDS: '60' } })
  await loginGuard(t, [app, app])
})

t.test('failed logins are limited per client address; a forged X-Forwarded-For does not help', async (t) => {
  const app = await build(t, { env: { LOGIN_MAX_FAILURES: '100', LOGIN_MAX_FAILURES_PER_CLIENT: '4' } })
  const user = await newUser(app, { password: 'right-password' })
  for (let i = 0; i < 4; i++) await login(app, `nobody${i}@example.com`, 'guess', { remoteAddress: '203.0.113.7' })
  assertProblem(t, await login(app, user.email, 'right-password', { remoteAddress: '203.0.113.7' }), 429, 'RATE_LIMITED', 'that address is locked')
  const forged = await login(app, user.email, 'right-password', { remoteAddress: '203.0.113.7', headers: { 'x-forwarded-for': '198.51.100.1' } })
  assertProblem(t, forged, 429, 'RATE_LIMITED', 'X-Forwarded-For is ignored without TRUST_PROXY')
  t.equal((await login(app, user.email, 'right-password', { remoteAddress: '203.0.113.8' })).statusCode, 201, 'another address logs in')
})

t.test('behind a configured proxy the forwarded address is the client', async (t) => {
  const app = await build(t, { env: { LOGIN_MAX_FAILURES: '100', LOGIN_MAX_FAILURES_PER_CLIENT: '2', TRUST_PROXY: '10.0.0.1' } })
  const user = await newUser(app, { password: 'right-password' })
  const via = (client: string) => ({ remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': client } })
  for (let i = 0; i < 2; i++) await login(app, 'nobody@example.com', 'guess', via('198.51.100.1'))
  assertProblem(t, await login(app, user.email, 'right-password', via('198.51.100.1')), 429, 'RATE_LIMITED')
  t.equal((await login(app, user.email, 'right-password', via('198.51.100.2'))).statusCode, 201)
})

t.test('the general rate limit counts per caller', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '60' } })
  // Each sign-up and login comes from its own address: the anonymous buckets stay apart from the users'.
  const user = await newUser(app)
  const self = () => app.inject({ url: `/users/${user.id}`, headers: user.headers })
  for (let i = 0; i < 5; i++) t.equal((await self()).statusCode, 200, `request ${i + 1}`)
  const limited = await self()
  assertProblem(t, limited, 429, 'RATE_LIMITED')
  t.ok(Number(limited.headers['retry-after']) > 0, 'Retry-After')
  t.equal((await app.inject('/health/ready')).statusCode, 200, 'health checks are never limited')
  const admin = await login(app, ADMIN.email, ADMIN.password, { remoteAddress: '198.51.100.9' })
  t.equal(admin.statusCode, 201, 'anonymous requests from another address have their own bucket')
  const other = await app.inject({ url: '/users', headers: { authorization: `Bearer ${admin.json().token}` } })
  t.equal(other.statusCode, 200, 'another user, from the same address as the limited one, has its own bucket')
})

t.test('requests refused at authentication count against their address', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_SECONDS: '60' } })
  const user = await newUser(app)
  const from = '203.0.113.7'
  const read = (headers: Record<string, string>) => app.inject({ url: `/users/${user.id}`, headers, remoteAddress: from })
  const refused = [
    await read({}),
    await read({ authorization: 'Bearer not-a-token-of-ours' }),
    await read({ authorization: 'Basic dXNlcjpwYXNz' })
  ]
  t.same(refused.map((r) => r.statusCode), [401, 401, 401], 'refused while within the limit')
  const limited = await read({ authorization: 'Bearer still-not-a-token' })
  assertProblem(t, limited, 429, 'RATE_LIMITED')
  t.ok(Number(limited.headers['retry-after']) > 0, 'Retry-After')
  const login = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password }, remoteAddress: from })
  assertProblem(t, login, 429, 'RATE_LIMITED', 'the address is over its anonymous limit on public routes too')
  t.equal((await read(user.headers)).statusCode, 200, 'a valid caller from that address counts in its own bucket')
  t.equal((await app.inject({ url: `/users/${user.id}`, remoteAddress: '203.0.113.8' })).statusCode, 401, 'another address is not held')
})

t.test('with Redis, limits are shared by every instance', async (t) => {
  const shared = await redisEnv(t)
  if (!shared) return
  const env = { ...shared, LOGIN_MAX_FAILURES: '3', LOGIN_WINDOW_SECONDS: '60' }
  const url = await sharedDatabase(t)
  const a = await build(t, { url, env })
  const b = await build(t, { url, env })
  await loginGuard(t, [a, b])

  const limitedEnv = { ...env, RATE_LIMIT_MAX: '4' }
  const c = await build(t, { url, env: limitedEnv })
  const d = await build(t, { url, env: limitedEnv })
  const user = await newUser(a)
  const codes = []
  for (let i = 0; i < 3; i++) codes.push((await c.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode)
  for (let i = 0; i < 2; i++) codes.push((await d.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode)
  t.same(codes, [200, 200, 200, 200, 429], 'the fifth request, on the other instance, is over the shared limit')
})

t.test('in-memory counters stay bounded under a flood of distinct callers', async (t) => {
  const counter = new MemoryCounter(100)
  t.teardown(() => counter.close())
  for (let i = 0; i < 1000; i++) await counter.hit(`flood-${i}`, 60_000)
  t.ok(counter.size <= 100, `at most 100 windows kept (${counter.size})`)
  t.equal((await counter.hit('flood-999', 60_000)).count, 2, 'the newest windows are the ones kept')
  t.equal((await counter.hit('flood-0', 60_000)).count, 1, 'the oldest were dropped first')
  const expired = await counter.hit('short', 1)
  await new Promise((r) => setTimeout(r, 5))
  t.equal((await counter.hit('short', 60_000)).count, 1, 'an expired window starts over')
  t.equal(expired.count, 1)
  // A window whose hits were all taken back is gone: the next hit starts a whole new one, as in Redis.
  await counter.hit('taken-back', 1_000)
  await new Promise((r) => setTimeout(r, 300))
  await counter.release('taken-back')
  const fresh = await counter.hit('taken-back', 1_000)
  t.equal(fresh.count, 1, 'released to zero, counted afresh')
  t.ok(fresh.ttlMs > 900, `in a new window (${fresh.ttlMs} ms left)`)
})

/** Redis settings for a test of its own (keys under a fresh prefix, removed afterwards), or undefined without Redis. */
async function redisEnv(t: Test): Promise<Record<string, string> | undefined> {
  if (!(await redisReachable())) {
    if (process.env.REQUIRE_REDIS === '1') t.fail(`Redis at ${REDIS_URL} is unreachable and REQUIRE_REDIS=1`)
    else t.comment(`Redis at ${REDIS_URL} is unreachable: the Redis variant did not run`)
    return undefined
  }
  const prefix = `roster-test:${randomBytes(6).toString('hex')}:`
  t.teardown(async () => {
    const redis = new Redis(REDIS_URL)
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length) await redis.del(...keys)
    await redis.quit()
  })
  return { RATE_LIMIT_REDIS_URL: REDIS_URL, REDIS_KEY_PREFIX: prefix }
}

for (const store of ['memory', 'redis'] as const) {
  t.test(`60 wrong passwords sent at once: at most 5 are checked, the rest 429 (${store})`, async (t) => {
    const shared = store === 'redis' ? await redisEnv(t) : {}
    if (!shared) return
    const app = await build(t, { env: { ...shared, LOGIN_MAX_FAILURES: '5' } })
    const user = await newUser(app, { password: 'right-password' })
    const answers = await Promise.all(Array.from({ length: 60 }, () => login(app, user.email, 'wrong-password')))
    const codes = answers.map((r) => r.statusCode)
    t.equal(codes.filter((c) => c === 401).length, 5, 'five checked and refused')
    t.equal(codes.filter((c) => c === 429).length, 55, 'the rest refused unchecked')
    for (const r of answers.filter((r) => r.statusCode === 429)) t.ok(Number(r.headers['retry-after']) > 0, 'with Retry-After')
    assertProblem(t, await login(app, user.email, 'right-password'), 429, 'RATE_LIMITED', 'the right password from that client too')
    t.equal((await login(app, user.email, 'right-password', { remoteAddress: '198.51.100.9' })).statusCode, 201,
      'the owner, from another client, is not locked out')
  })

  t.test(`current_password is guarded like a login (${store})`, async (t) => {
    const shared = store === 'redis' ? await redisEnv(t) : {}
    if (!shared) return
    const app = await build(t, { env: { ...shared, LOGIN_MAX_FAILURES: '5' } })
    const user = await newUser(app, { password: 'right-password' })
    const guesses = await Promise.all(Array.from({ length: 60 }, (_, i) => app.inject({
      method: 'PUT', url: `/users/${user.id}/password`, headers: user.headers,
      payload: { password: `stolen-password-${i}`, current_password: `guess-${i}` }
    })))
    const codes = guesses.map((r) => r.statusCode)
    t.equal(codes.filter((c) => c === 401).length, 5, 'five guesses checked')
    t.equal(codes.filter((c) => c === 429).length, 55, 'the rest refused unchecked')
    for (const r of guesses.filter((r) => r.statusCode === 401)) assertProblem(t, r, 401, 'INVALID_CREDENTIALS', 'a wrong guess')
    const right = await app.inject({ method: 'PUT', url: `/users/${user.id}/password`, headers: user.headers, payload: { password: 'new-password-1', current_password: 'right-password' } })
    assertProblem(t, right, 429, 'RATE_LIMITED', 'even the right one, from that client, until the window ends')
    t.equal((await login(app, user.email, 'right-password')).statusCode, 429, 'the same account and client, whatever checks the password')
  })
}

t.test('one client\'s failures lock that client out; the account locks for everyone only at the per-account limit', async (t) => {
  const app = await build(t, { env: { LOGIN_MAX_FAILURES: '3', LOGIN_MAX_FAILURES_PER_ACCOUNT: '7' } })
  const user = await newUser(app, { password: 'right-password' })
  for (let i = 0; i < 3; i++) await login(app, user.email, 'wrong', { remoteAddress: '203.0.113.1' })
  assertProblem(t, await login(app, user.email, 'right-password', { remoteAddress: '203.0.113.1' }), 429, 'RATE_LIMITED', 'that client is locked out')
  t.equal((await login(app, user.email, 'right-password', { remoteAddress: '203.0.113.2' })).statusCode, 201, 'the owner elsewhere is not')
  for (let i = 0; i < 3; i++) await login(app, user.email, 'wrong', { remoteAddress: '203.0.113.3' })
  t.equal((await login(app, user.email, 'wrong', { remoteAddress: '203.0.113.4' })).statusCode, 401, 'the seventh failure is still checked')
  assertProblem(t, await login(app, user.email, 'right-password', { remoteAddress: '203.0.113.5' }), 429, 'RATE_LIMITED',
    'past LOGIN_MAX_FAILURES_PER_ACCOUNT the account is locked for every client')
})

/** A Redis server of the test's own, on a free port, that it can stop, start again and freeze. */
async function privateRedis(t: Test) {
  const { spawn } = await import('node:child_process')
  const net = await import('node:net')
  const port = await new Promise<number>((resolve) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (probe.address() as { port: number }).port
      probe.close(() => resolve(p))
    })
  })
  let child: ReturnType<typeof spawn> | undefined
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
    for (let i = 0; i < 100; i++) {
      const probe = new Redis(`redis://127.0.0.1:${port}`, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
      probe.on('error', () => {})
      const up = await probe.connect().then(() => true, () => false)
      probe.disconnect()
      if (up) return
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error('redis-server did not start')
  }
  const stop = async () => {
    if (!child) return
    const exited = new Promise((r) => child!.once('exit', r))
    child.kill('SIGKILL')
    await exited
    child = undefined
  }
  t.teardown(stop)
  await start()
  return { url: `redis://127.0.0.1:${port}`, start, stop, freeze: () => child?.kill('SIGSTOP'), thaw: () => child?.kill('SIGCONT') }
}

t.test('Redis going away: requests are answered at once, limits apply per process, Redis is taken up again', async (t) => {
  if (!(await redisReachable())) {
    if (process.env.REQUIRE_REDIS === '1') t.fail('Redis is required (REQUIRE_REDIS=1) and redis-server is needed for this test')
    return
  }
  const redis = await privateRedis(t)
  const warnings: string[] = []
  const { buildApp } = await import('../../src/app.js')
  const { loadConfig } = await import('../../src/config.js')
  const { ADMIN } = await import('../helpers.js')
  const app = await buildApp(loadConfig({
    DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'warn', RATE_LIMIT_REDIS_URL: redis.url, RATE_LIMIT_MAX: '6', MAX_EVENT_LOOP_DELAY_MS: '0',
    ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password
  }), { logStream: { write: (line: string) => { warnings.push(JSON.parse(line).msg) } } })
  t.teardown(() => app.close())
  await app.ready()
  const token = (await login(app, ADMIN.email, ADMIN.password)).json().token
  const me = (await app.inject({ url: '/users?limit=1', headers: { authorization: `Bearer ${token}` } })).json().items[0].id
  const read = () => app.inject({ url: `/users/${me}`, headers: { authorization: `Bearer ${token}` } })

  await redis.stop()
  const started = Date.now()
  const codes: number[] = []
  for (let i = 0; i < 7; i++) codes.push((await read()).statusCode)
  const elapsed = Date.now() - started
  t.ok(elapsed < 1500, `seven requests answered in ${elapsed} ms with Redis down`)
  t.same(codes, [200, 200, 200, 200, 200, 200, 429], 'the limit keeps applying, per process (a window of its own: 6 pass)')
  const loginStarted = Date.now()
  t.equal((await login(app, ADMIN.email, 'wrong-password')).statusCode, 401, 'a login is answered')
  t.ok(Date.now() - loginStarted < 1500, 'at once')
  t.equal(warnings.filter((w) => w.startsWith('redis unavailable')).length, 1, 'the outage is logged once')

  await redis.start()
  const back = Date.now()
  while (!warnings.some((w) => w.startsWith('redis available again')) && Date.now() - back < 10_000) await new Promise((r) => setTimeout(r, 100))
  const backIn = Date.now() - back
  t.ok(warnings.some((w) => w.startsWith('redis available again')), `Redis taken up again after ${backIn} ms`)
  t.comment(`redis stopped: seven requests answered in ${elapsed} ms, limits per process meanwhile; taken up again ${backIn} ms after it restarted`)
  t.equal((await read()).statusCode, 200, 'a fresh window in the fresh Redis')
  const probe = new Redis(redis.url)
  t.ok((await probe.keys('roster:rl:*')).length > 0, 'the counters live in Redis again')
  await probe.quit()

  redis.freeze()
  const frozenAt = Date.now()
  // The in-process window still holds the outage's hits: 200 or 429, but at once.
  const hung = (await read()).statusCode
  t.ok(hung === 200 || hung === 429, `a hung Redis is not waited for (${hung})`)
  t.ok(Date.now() - frozenAt < 1000, `answered in ${Date.now() - frozenAt} ms`)
  redis.thaw()
})

t.test('a service starting while Redis is unreachable starts, says so once, and limits per process', async (t) => {
  const warnings: string[] = []
  const { buildApp } = await import('../../src/app.js')
  const { loadConfig } = await import('../../src/config.js')
  const started = Date.now()
  const app = await buildApp(loadConfig({
    DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'warn', RATE_LIMIT_REDIS_URL: 'redis://127.0.0.1:1', RATE_LIMIT_MAX: '2', MAX_EVENT_LOOP_DELAY_MS: '0'
  }), { logStream: { write: (line: string) => { warnings.push(JSON.parse(line).msg) } } })
  t.teardown(() => app.close())
  await app.ready()
  t.ok(Date.now() - started < 5000, `started in ${Date.now() - started} ms`)
  const codes = []
  for (let i = 0; i < 3; i++) codes.push((await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'a@b.co', password: 'x' } })).statusCode)
  t.same(codes, [401, 401, 429], 'the limit applies, per process')
  t.equal(warnings.filter((w) => w.startsWith('redis unavailable')).length, 1, 'said once')
})
