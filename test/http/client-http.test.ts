import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { adminUser, assertProblem, build, newUser } from '../helpers.js'

const loadStatus = (value: string) => loadConfig({ FORBIDDEN_STATUS: value })

t.test('a known path with a method it does not serve: 405 with Allow; OPTIONS: 204 with Allow', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const patch = await app.inject({ method: 'PATCH', url: `/users/${user.id}`, headers: user.headers })
  assertProblem(t, patch, 405, 'METHOD_NOT_ALLOWED')
  t.equal(patch.headers.allow, 'GET, HEAD, DELETE, OPTIONS')
  const post = await app.inject({ method: 'POST', url: `/users/${user.id}/name`, payload: { name: 'x' } })
  assertProblem(t, post, 405, 'METHOD_NOT_ALLOWED', 'POST on a PUT-only key path')
  t.equal(post.headers.allow, 'PUT, OPTIONS')
  const emails = await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails` })
  t.equal(emails.headers.allow, 'GET, HEAD, POST, OPTIONS')

  const options = await app.inject({ method: 'OPTIONS', url: `/users/${user.id}/email` })
  t.equal(options.statusCode, 204)
  t.equal(options.headers.allow, 'GET, HEAD, POST, PUT, DELETE, OPTIONS')
  t.equal(options.body, '')
  const byAddress = await app.inject({ method: 'OPTIONS', url: '/users/email/a%40b.example' })
  t.equal(byAddress.headers.allow, 'GET, HEAD, OPTIONS', 'the address lookup is not confused with /users/{user_id}/…')

  assertProblem(t, await app.inject({ method: 'PATCH', url: '/nowhere' }), 404, 'NOT_FOUND', 'an unknown path stays 404')
  assertProblem(t, await app.inject({ method: 'OPTIONS', url: '/nowhere' }), 404, 'NOT_FOUND')
})

t.test('a content type on a request without a body is accepted', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const second = (await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'second@example.com' } })).json()
  for (const type of ['application/json', 'multipart/form-data; boundary=x', 'text/plain', 'application/x-www-form-urlencoded']) {
    const res = await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: { ...user.headers, 'content-type': type } })
    t.equal(res.statusCode, 200, `GET with ${type}`)
  }
  const del = await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${second.id}`, headers: { ...user.headers, 'content-type': 'application/json' } })
  t.equal(del.statusCode, 204, 'DELETE with Content-Type: application/json and no body')
  const logout = await app.inject({ method: 'DELETE', url: '/auth/tokens/current', headers: { ...user.headers, 'content-type': 'application/json', 'content-length': '0' } })
  t.equal(logout.statusCode, 204, 'with Content-Length: 0 too')
  const emptyPost = await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' } })
  assertProblem(t, emptyPost, 400, 'VALIDATION_FAILED', 'a POST that needs a body still needs one')
  const broken = await app.inject({ method: 'POST', url: '/users', headers: { 'content-type': 'application/json' }, payload: '{' })
  assertProblem(t, broken, 400, 'VALIDATION_FAILED', 'a body that is there is still parsed')
})

t.test('FORBIDDEN_STATUS=403 moves the status of refusals, not their code; 401 stays for the unauthenticated', async (t) => {
  const app = await build(t, { env: { FORBIDDEN_STATUS: '403' } })
  const a = await newUser(app)
  const b = await newUser(app)
  const other = await app.inject({ url: `/users/${b.id}`, headers: a.headers })
  assertProblem(t, other, 403, 'FORBIDDEN')
  t.equal(other.headers['www-authenticate'], 'Bearer realm="api", error="insufficient_scope"')
  const admin = await adminUser(app)
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${a.id}/email`, headers: admin.headers }), 403, 'FORBIDDEN', 'owner-only')
  assertProblem(t, await app.inject({ url: `/users/${b.id}` }), 401, 'UNAUTHENTICATED')
  const wrong = await app.inject({ method: 'PUT', url: `/users/${a.id}/password`, headers: a.headers, payload: { password: 'new-password-1', current_password: 'wrong-password' } })
  assertProblem(t, wrong, 403, 'INVALID_CREDENTIALS', 'a refusal with a code of its own moves too')
  const doc = (await app.inject({ url: '/openapi.json' })).json()
  t.ok(doc.paths['/users/{user_id}'].get.responses['403'], 'the document lists 403')
  t.throws(() => loadStatus('402'), /FORBIDDEN_STATUS must be 401 or 403/)
})

t.test('answers carry RateLimit-Policy and RateLimit, and the remaining count falls', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_MAX: '5', RATE_LIMIT_WINDOW_SECONDS: '60' } })
  const user = await newUser(app)
  const seen = []
  for (let i = 0; i < 6; i++) {
    const res = await app.inject({ url: `/users/${user.id}`, headers: user.headers })
    t.equal(res.headers['ratelimit-policy'], '"default";q=5;w=60')
    seen.push(res.headers.ratelimit)
    if (i === 5) assertProblem(t, res, 429, 'RATE_LIMITED', 'past the limit')
  }
  t.match(seen[0], /^"default";r=4;t=\d+$/)
  t.match(seen[3], /^"default";r=1;t=\d+$/)
  t.match(seen[5], /^"default";r=0;t=\d+$/)
  const anonymous = await app.inject({ url: '/users' })
  t.match(anonymous.headers.ratelimit, /^"default";r=\d+;t=\d+$/, 'a refusal at authentication carries them too')
})

t.test('CORS is off by default; CORS_ORIGINS turns it on for those origins, preflight included', async (t) => {
  const off = await build(t)
  const plain = await off.inject({ url: '/health/live', headers: { origin: 'https://console.example.com' } })
  t.notOk(plain.headers['access-control-allow-origin'], 'no CORS headers by default')

  const app = await build(t, { env: { CORS_ORIGINS: 'https://console.example.com, http://localhost:5173' } })
  const user = await newUser(app)
  const preflight = await app.inject({
    method: 'OPTIONS', url: `/users/${user.id}/name`,
    headers: { origin: 'https://console.example.com', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization, content-type, if-match' }
  })
  t.equal(preflight.statusCode, 204, 'preflight')
  t.equal(preflight.headers['access-control-allow-origin'], 'https://console.example.com')
  t.match(preflight.headers['access-control-allow-methods'], /PUT/)
  t.match(String(preflight.headers['access-control-allow-headers']).toLowerCase(), /authorization.*content-type.*if-match.*idempotency-key/)

  const read = await app.inject({ url: `/users/${user.id}`, headers: { ...user.headers, origin: 'http://localhost:5173' } })
  t.equal(read.statusCode, 200)
  t.equal(read.headers['access-control-allow-origin'], 'http://localhost:5173')
  const exposed = String(read.headers['access-control-expose-headers'])
  for (const name of ['ETag', 'Location', 'Link', 'Retry-After', 'RateLimit', 'RateLimit-Policy', 'X-Request-Id']) t.match(exposed, name, `${name} exposed`)

  const stranger = await app.inject({ url: `/users/${user.id}`, headers: { ...user.headers, origin: 'https://evil.example' } })
  t.notOk(stranger.headers['access-control-allow-origin'], 'another origin gets no CORS headers')
  const plainOptions = await app.inject({ method: 'OPTIONS', url: `/users/${user.id}` })
  t.equal(plainOptions.statusCode, 204, 'an OPTIONS without an origin is still answered')
  t.equal(plainOptions.headers.allow, 'GET, HEAD, DELETE, OPTIONS')
  t.throws(() => loadConfig({ CORS_ORIGINS: 'console.example.com' }), /CORS_ORIGINS must be/)
})
