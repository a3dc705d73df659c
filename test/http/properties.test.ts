// Property tests: generated requests (valid, almost valid and hostile) for every route; no answer may be a 5xx,
// and every 4xx must be problem+json with one of the contract's codes.
import fc from 'fast-check'
import t from 'tap'
import { ErrorCode } from '../../schemas/problem.js'
import { adminUser, build, newUser, type TestUser } from '../helpers.js'

// Every code of the contract's ErrorCode enum but INTERNAL (a 5xx fails the property on its own).
const CODES = new Set((ErrorCode as unknown as { enum: string[] }).enum.filter((code) => code !== 'INTERNAL'))
const RUNS = Number(process.env.PROPERTY_RUNS ?? 40)

const hostileKeys = fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'name', 'email', 'address',
  'password', 'current_password', 'role', 'status', 'id', 'limit', 'cursor', '', ' ', 'é', '💥', 'a'.repeat(300))
const hostileStrings = fc.oneof(
  fc.string(), fc.string({ unit: 'grapheme', maxLength: 50 }), fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom('', ' ', '*', '**', 'a*b', '%', '_', '\\', '%00', '\u0000', '\uFFFF', '\uD800', 'null', 'true', '0', '-1', '01', '1e3',
    '0x10', '9007199254740993', 'ADMIN', 'BANNED', 'admin', 'ACTIVE', 'a@b.c', 'A@EXAMPLE.COM', 'x'.repeat(5000), '"quoted"', '<script>'),
  fc.emailAddress()
)
const value: fc.Arbitrary<unknown> = fc.oneof(hostileStrings, fc.integer(), fc.double(), fc.boolean(), fc.constant(null),
  fc.array(hostileStrings, { maxLength: 3 }), fc.dictionary(hostileKeys, hostileStrings, { maxKeys: 3 }))
const objectBody = fc.dictionary(hostileKeys, value, { maxKeys: 5 })
const contentTypes = fc.constantFrom(
  'application/json', 'APPLICATION/JSON', 'application/json; charset=utf-8', 'application/json; charset=latin1', 'application/json;',
  'application/x-www-form-urlencoded', 'multipart/form-data', 'multipart/form-data; boundary=xyz', 'multipart/form-data; boundary=',
  'text/plain', 'text/plain; charset=utf-16', 'application/octet-stream', 'image/png', 'application/vnd.api+json', '*/*', 'json', ';', undefined
)

const text = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v) ?? 'undefined')

/** A body serialised in the way its content type claims, or deliberately not. */
const body = fc.oneof(
  objectBody.map((o) => JSON.stringify(o)),
  objectBody.map((o) => new URLSearchParams(Object.entries(o).map(([k, v]): [string, string] => [k, text(v)])).toString()),
  objectBody.map((o) => {
    const b = 'xyz'
    return Object.entries(o).map(([k, v]) => `--${b}\r\nContent-Disposition: form-data; name="${k}"${typeof v === 'string' && v.length % 2 ? '; filename="f.txt"' : ''}\r\n\r\n${text(v)}\r\n`).join('') + `--${b}--\r\n`
  }),
  fc.string({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
  fc.constantFrom('{', '{"a":', '[]', '[1,2]', '"x"', '42', 'null', '{"__proto__":{"role":"admin"}}', '{"constructor":{"prototype":{"x":1}}}',
    '{"name":"A","name":"B"}', 'x'.repeat(20_000)),
  fc.constant(undefined)
)

interface Target { path: string; method: string }

/** Percent-encodes a path segment; a lone surrogate goes out as its invalid UTF-8 bytes, a hostile input of its own. */
function encodeSegment(text: string): string {
  try {
    return encodeURIComponent(text)
  } catch {
    return [...Buffer.from(text, 'latin1')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('') + '%ED%A0%80'
  }
}

function fill(path: string, segment: (name: string) => string): string {
  return path.replace(/:(\w+)/g, (_, name: string) => encodeSegment(segment(name)))
}

t.test('no generated request gets a 5xx; every 4xx is problem+json', async (t) => {
  const app = await build(t, { env: { LOGIN_MAX_FAILURES_PER_CLIENT: '100000', LOGIN_MAX_FAILURES: '1000' } })
  // Destructive routes last (deleting the admin or revoking tokens would turn the rest into 401s); each route gets
  // callers logged in afresh.
  const rank = (r: Target) => (r.method !== 'DELETE' ? 0 : r.path === '/users/:user_id' ? 2 : 1)
  const routes: Target[] = app.routePlans
    .filter((r) => r.method !== 'HEAD' && !r.url.startsWith('/docs'))
    .map((r) => ({ path: r.url, method: r.method }))
    .sort((a, b) => rank(a) - rank(b))

  let requests = 0
  const statusCounts = new Map<number, number>()
  for (const route of routes) {
    const admin = await adminUser(app)
    const user = await newUser(app)
    const emailId = (await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })).json().id
    const segment = (who: TestUser) => fc.oneof(
      fc.constant((name: string) => (name === 'user_id' ? String(who.id) : name === 'email_id' ? String(emailId) : who.email)),
      hostileStrings.filter((s) => s.length > 0).map((s) => () => s)
    )
    await fc.assert(fc.asyncProperty(
      fc.constantFrom(admin, user),
      fc.oneof({ arbitrary: fc.constant('valid'), weight: 4 }, { arbitrary: fc.constant('none'), weight: 1 }, { arbitrary: fc.constant('garbage'), weight: 1 }),
      fc.dictionary(hostileKeys, fc.oneof(hostileStrings, fc.array(hostileStrings, { maxLength: 3 })), { maxKeys: 4 }),
      contentTypes,
      body,
      fc.option(fc.constantFrom('"v1"', '*', 'W/"x"', 'garbage', '"v999999999999999"'), { nil: undefined }),
      fc.option(fc.constantFrom('PUT', 'DELETE', 'GET', 'PATCH', 'put', ' delete ', 'TRACE'), { nil: undefined }),
      fc.boolean(),
      async (who, auth, query, contentType, payload, ifMatch, override, validIds) => {
        const seg = validIds ? (name: string) => (name === 'user_id' ? String(who.id) : name === 'email_id' ? String(emailId) : who.email) : undefined
        const hostile = fc.sample(segment(who), 1)[0]!
        const url = fill(route.path, seg ?? hostile) + (Object.keys(query).length ? `?${new URLSearchParams(
          Object.entries(query).flatMap(([k, v]): Array<[string, string]> => (Array.isArray(v) ? v.map((x): [string, string] => [k, x]) : [[k, v]]))
        ).toString()}` : '')
        const headers: Record<string, string> = {}
        if (auth === 'valid') headers.authorization = who.headers.authorization
        if (auth === 'garbage') headers.authorization = 'Bearer not-a-token'
        if (contentType !== undefined) headers['content-type'] = contentType
        if (ifMatch !== undefined) headers['if-match'] = ifMatch
        if (override !== undefined) headers['x-http-method-override'] = override
        const res = await app.inject({ method: route.method as 'GET', url, headers, ...(payload !== undefined && route.method !== 'GET' ? { payload } : {}) })
        requests++
        statusCounts.set(res.statusCode, (statusCounts.get(res.statusCode) ?? 0) + 1)
        if (res.statusCode >= 500) throw new Error(`${route.method} ${url} answered ${res.statusCode}: ${res.body.slice(0, 300)}`)
        if (res.statusCode >= 400 && url.startsWith('/scim/v2/') && String(res.headers['content-type']).startsWith('application/scim+json')) {
          // SCIM's own error shape, as its clients read it (what fails before the SCIM routes is problem+json).
          const error = res.json()
          if (!String(res.headers['content-type']).startsWith('application/scim+json') || error.status !== String(res.statusCode) ||
            !error.schemas?.includes('urn:ietf:params:scim:api:messages:2.0:Error')) throw new Error(`${route.method} ${url}: ${res.statusCode} is not a SCIM error`)
        } else if (res.statusCode >= 400) {
          if (!String(res.headers['content-type']).startsWith('application/problem+json')) throw new Error(`${route.method} ${url}: ${res.statusCode} is not problem+json`)
          const problem = res.json()
          if (!CODES.has(problem.code) || problem.status !== res.statusCode) throw new Error(`${route.method} ${url}: bad problem ${res.body.slice(0, 200)}`)
        }
      }
    ), { numRuns: RUNS, includeErrorInReport: true })
    t.pass(`${route.method} ${route.path}: ${RUNS} generated requests`)
  }
  t.comment(`${requests} generated requests; answers by status: ${JSON.stringify(Object.fromEntries([...statusCounts].sort()))}`)
  t.equal((await app.inject('/health/ready')).statusCode, 200, 'the service still answers')
})
