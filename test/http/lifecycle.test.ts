import t from 'tap'
import { PHASES, routeSteps } from '../../src/steps.js'
import { adminUser, assertProblem, build, newUser, sharedDatabase } from '../helpers.js'

// The order of the per-route steps is declared once (src/steps.ts). These tests fail when it changes,
// whether by an edit to the list or by a step installed some other way.

t.test('the declared order of the steps, each in a phase no earlier than the one before', async (t) => {
  const LIFECYCLE = routeSteps(await build(t))
  t.same(LIFECYCLE.map((s) => s.name), [
    'authenticate', 'rate-limit', 'canonical-ids', 'multipart', 'no-body', 'authorize', 'idempotency', 'conditional-get', 'idempotency-record'
  ])
  const phases = LIFECYCLE.map((s) => PHASES.indexOf(s.phase))
  t.same(phases, [...phases].sort((a, b) => a - b), 'phases never go backwards')
})

t.test('each route gets the steps it needs, in the declared order', async (t) => {
  const app = await build(t)
  const plan = (method: string, url: string) => app.routePlans.find((p) => p.method === method && p.url === url)?.steps
  t.same(plan('GET', '/users/:user_id'), ['authenticate', 'rate-limit', 'canonical-ids', 'authorize', 'conditional-get'])
  t.same(plan('HEAD', '/users/:user_id'), ['authenticate', 'rate-limit', 'canonical-ids', 'authorize', 'conditional-get'], 'HEAD as its GET')
  t.same(plan('GET', '/users'), ['authenticate', 'rate-limit', 'canonical-ids', 'authorize', 'conditional-get'], 'the id filter is checked')
  t.same(plan('PUT', '/users/:user_id/name'), ['authenticate', 'rate-limit', 'canonical-ids', 'multipart', 'authorize'])
  t.same(plan('POST', '/users'), ['authenticate', 'rate-limit', 'multipart', 'idempotency', 'idempotency-record'], 'a public write that creates: no authorization, idempotency keys')
  t.same(plan('POST', '/users/:user_id/emails'), ['authenticate', 'rate-limit', 'canonical-ids', 'multipart', 'authorize', 'idempotency', 'idempotency-record'])
  t.same(plan('DELETE', '/users/:user_id/emails/:email_id'), ['authenticate', 'rate-limit', 'canonical-ids', 'multipart', 'authorize'])
  t.same(plan('POST', '/users/:user_id/restore'), ['authenticate', 'rate-limit', 'canonical-ids', 'multipart', 'no-body', 'authorize'], 'a write that takes no body')
  t.same(plan('GET', '/health/live'), ['authenticate', 'conditional-get'], 'health checks are never rate limited')
  const LIFECYCLE = routeSteps(app)
  for (const p of app.routePlans) {
    const order = p.steps.map((s) => LIFECYCLE.findIndex((l) => l.name === s))
    t.same(order, [...order].sort((a, b) => a - b), `${p.method} ${p.url} follows the declared order`)
  }
})

t.test('what a client sees where the steps meet', async (t) => {
  // Users are made through an app without a limit; the probes go through one with a limit of 3, on the same data.
  const url = await sharedDatabase(t)
  const setup = await build(t, { url })
  const [user, other, fresh] = [await newUser(setup), await newUser(setup), await newUser(setup)]
  const app = await build(t, { url, env: { RATE_LIMIT_MAX: '3' } })

  // authenticate before canonical-ids: an anonymous caller learns nothing about the path.
  assertProblem(t, await app.inject({ url: '/users/01' }), 401, 'UNAUTHENTICATED', 'anonymous, bad id')
  // canonical-ids before authorize: a malformed id is the caller's mistake, whoever it names.
  assertProblem(t, await app.inject({ url: '/users/01', headers: user.headers }), 400, 'VALIDATION_FAILED', 'authenticated, bad id')
  // rate-limit before authorize and validation: refused requests count against the caller too.
  assertProblem(t, await app.inject({ url: `/users/${other.id}`, headers: user.headers }), 401, 'FORBIDDEN', 'a refusal at authorization, counted')
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode, 200, 'an own read, counted')
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: user.headers }), 429, 'RATE_LIMITED', 'the fourth request of the caller (the 400 above was the first)')
  assertProblem(t, await app.inject({ url: `/users/${other.id}`, headers: user.headers }), 429, 'RATE_LIMITED', 'past the limit, even a refusal costs no authorization')
  // conditional-get last: a 304 still passed every other step.
  const first = await app.inject({ url: `/users/${fresh.id}`, headers: fresh.headers })
  const again = await app.inject({ url: `/users/${fresh.id}`, headers: { ...fresh.headers, 'if-none-match': String(first.headers.etag) } })
  t.equal(again.statusCode, 304)
  assertProblem(t, await app.inject({ url: `/users/${fresh.id}`, headers: { 'if-none-match': String(first.headers.etag) } }), 401, 'UNAUTHENTICATED', 'no 304 without a caller')
})

t.test('a POST that takes no body refuses fields sent anyway, and changes nothing', async (t) => {
  const app = await build(t, { env: { ACCOUNT_DELETION_GRACE_SECONDS: '600' } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  const json = { ...admin.headers, 'content-type': 'application/json' }
  const shown = async () => (await app.inject({ url: `/users/${user.id}`, headers: admin.headers })).json().deletion_scheduled_at
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: admin.headers })).statusCode, 202)
  const restore = (headers: Record<string, string>, payload?: string) =>
    app.inject({ method: 'POST', url: `/users/${user.id}/restore`, headers, ...(payload === undefined ? {} : { payload }) })
  const refused = await restore(json, '{"bogus":1}')
  assertProblem(t, refused, 400, 'VALIDATION_FAILED', 'a field')
  t.match(refused.json().errors, [{ path: '/bogus', in: 'body', message: 'is not a known field' }])
  assertProblem(t, await restore(json, '[1]'), 400, 'VALIDATION_FAILED', 'a list')
  assertProblem(t, await restore({ ...admin.headers, 'content-type': 'application/x-www-form-urlencoded' }, 'bogus=1'), 400, 'VALIDATION_FAILED', 'a form field')
  t.type(await shown(), 'string', 'still scheduled: nothing changed')
  t.equal((await restore(json, '{}')).statusCode, 200, '{} holds no field')
  t.equal(await shown(), null, 'restored')
})

t.test('a route without an authorization rule cannot be registered', async (t) => {
  await t.rejects(build(t, { extend: (app) => { app.get('/undeclared', async () => 'x') } }), /must declare config\.auth/)
})
