import t from 'tap'
import { adminUser, build, ENGINE, newUser } from '../helpers.js'
import { TestSmtp } from '../mail/smtp.js'
import { Receiver, until } from '../webhooks/receiver.js'
import { tracing } from '../../src/tracing/spans.js'
import { Collector, type Span } from './collector.js'

t.test('traces: a span per request with its route and request id, continuing the caller\'s trace; database, SMTP and webhook spans beneath', async (t) => {
  const collector = await Collector.start(t)
  const smtp = await TestSmtp.start(t)
  const receiver = await Receiver.start(t)
  const app = await build(t, {
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: 'roster-under-test', SMTP_URL: smtp.url,
      WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true'
    },
    mail: { pollMs: 50 }, events: { pollMs: 50 }
  })
  const admin = await adminUser(app)
  const hook = await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: { url: receiver.url, events: ['user.updated'] } })
  t.equal(hook.statusCode, 201, hook.body)
  const user = await newUser(app)
  await smtp.waitFor(user.email)

  const traceId = '0af7651916cd43dd8448eb211c80319c'
  const read = await app.inject({
    method: 'GET', url: `/users/${user.id}`,
    headers: { ...user.headers, 'x-request-id': 'trace-me-1', traceparent: `00-${traceId}-b7ad6b7169203331-01` }
  })
  t.equal(read.statusCode, 200)
  await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: 'Traced' } })
  // An address in the path and in the query.
  t.equal((await app.inject({ method: 'GET', url: `/users/email/${encodeURIComponent(user.email)}`, headers: admin.headers })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: `/users?email=${encodeURIComponent(user.email)}`, headers: admin.headers })).statusCode, 200)
  await until('the webhook delivery', () => receiver.received.length > 0)
  await app.close() // sends what is batched

  const spans = collector.spans
  t.ok(spans.every((s) => s.service === 'roster-under-test'), 'service.name from OTEL_SERVICE_NAME')
  const request = spans.find((s) => s.attributes['http.request.id'] === 'trace-me-1')
  t.ok(request, 'the request\'s span carries its request id')
  if (!request) return
  t.equal(request.traceId, traceId, 'the caller\'s traceparent is continued')
  t.equal(request.parentSpanId, 'b7ad6b7169203331')
  t.equal(request.attributes['http.route'], '/users/:user_id', 'the route template, not the path')
  t.equal(request.name, 'GET /users/:user_id', 'named by its method and route template')
  t.equal(request.attributes['url.path'], '/users/:user_id', 'url.path holds the template too')
  const leaked = spans.filter((s) => JSON.stringify(s.attributes).includes(user.email.split('@')[0]!))
  t.same(leaked.map((s) => s.name), [], 'no span carries the address, sent in a path or a query')
  t.ok(spans.some((s) => s.name === 'GET /users/email/:email'), 'the read by address was traced')
  t.ok(spans.some((s) => s.name === 'GET /users'), 'and so was the filter by address')
  const inTrace = spans.filter((s) => s.traceId === traceId)
  const statements = inTrace.filter((s) => s.attributes['db.system.name'] === (ENGINE === 'mysql' ? 'mysql' : 'sqlite'))
  t.ok(statements.length > 0, 'the request\'s database statements are spans of its trace')
  const byId = new Map(inTrace.map((s) => [s.spanId, s]))
  const below = (s: Span): boolean => {
    if (s.parentSpanId === request.spanId) return true
    const parent = s.parentSpanId === undefined ? undefined : byId.get(s.parentSpanId)
    return parent !== undefined && below(parent)
  }
  t.ok(statements.every(below), 'each beneath the request\'s span')
  t.ok(statements.every((s) => typeof s.attributes['db.query.text'] === 'string' && !String(s.attributes['db.query.text']).includes(user.email)), 'the statement\'s text, never its values')
  t.ok(spans.some((s) => s.name === 'smtp send' && s.attributes['server.address'] === '127.0.0.1'), 'an SMTP send')
  t.ok(spans.some((s) => s.name === 'POST' && s.attributes['server.port'] === receiver.port && s.attributes['http.response.status_code'] === 204), 'a webhook post')
})

t.test('without OTEL_EXPORTER_OTLP_ENDPOINT nothing is traced, and the instrumentation is not registered', async (t) => {
  const app = await build(t)
  t.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200)
  t.equal(app.hasRequestDecorator('opentelemetry'), false, '@fastify/otel is not registered')
  t.equal(tracing(), false, 'no span is made beneath a request either')
})

t.test('a password login sends one statement to find the user and one to lock it with its sessions, then only its writes', async (t) => {
  const collector = await Collector.start(t)
  const app = await build(t, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url } })
  const user = await newUser(app)
  await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password } })
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
  const login = await app.inject({
    method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password },
    headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` }
  })
  t.equal(login.statusCode, 201, login.body)
  await app.close()
  const texts = collector.spans.filter((s) => s.traceId === traceId && s.attributes['db.query.text'] !== undefined)
    .map((s) => String(s.attributes['db.query.text']).replace(/[`"]/g, ''))
  // What each statement is: its verb and first table. SQLite's `begin` is no round trip (the engine is in the process);
  // on MySQL it is sent, and left out here.
  const kindOf = (text: string) => {
    const verb = /^(select|insert into|update|delete from|commit)/.exec(text)?.[1] ?? text
    const table = /^(?:insert into|update|delete from) (\w+)/.exec(text)?.[1] ?? / from (\w+)/.exec(text)?.[1]
    return table === undefined ? verb : `${verb} ${table}`
  }
  const kinds = texts.filter((text) => text !== 'begin').map(kindOf)
  t.same(kinds, [
    'select emails', 'select users', 'insert into sessions', 'insert into tokens', 'insert into refresh_tokens', 'insert into events', 'commit'
  ], `the login's statements, in order:\n${texts.join('\n')}`)
  const lock = texts.filter((text) => text.startsWith('select'))[1] ?? ''
  t.match(lock, /left join sessions on sessions\.user_id = users\.id/, 'the user\'s sessions come with the lock of its row')
  if (ENGINE === 'mysql') t.match(lock, /for update$/, 'locked (MySQL)')
})
