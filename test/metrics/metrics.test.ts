import t, { type Test } from 'tap'
import { freePort, ADMIN, build, bearer, login, newUser, ENGINE } from '../helpers.js'
import type { App } from '../../src/app.js'
import { Receiver, until } from '../webhooks/receiver.js'

/** Prometheus's text exposition, parsed: each sample's value by its name and labels as written. */
function parse(text: string): Map<string, number> {
  const samples = new Map<string, number>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) (\S+)$/.exec(line)
    if (!match) throw new Error(`not a sample line: ${line}`)
    samples.set(match[1]!, Number(match[2]))
  }
  return samples
}

let lastText = ''

/** The app with its metrics port open, as the service's start opens it; the scrape function reads it over a socket. */
async function withMetrics(t: Test, env: Record<string, string> = {}): Promise<{ app: App; scrape: () => Promise<Map<string, number>>; url: string }> {
  const port = await freePort()
  const app = await build(t, { env: { METRICS_PORT: String(port), ...env } })
  await app.listenMetrics()
  const url = `http://127.0.0.1:${port}/metrics`
  return {
    app, url,
    scrape: async () => {
      const res = await fetch(url)
      t.equal(res.status, 200)
      t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
      lastText = await res.text()
      return parse(lastText)
    }
  }
}

const value = (samples: Map<string, number>, key: string) => samples.get(key) ?? 0

t.test('request durations by method, route template and status; 429s as refusals', async (t) => {
  const { app, scrape } = await withMetrics(t, { RATE_LIMIT_MAX: '3' })
  const before = await scrape()
  const user = await newUser(app)
  for (let i = 0; i < 5; i++) await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: bearer(user.token) })
  await app.inject({ method: 'GET', url: '/nowhere' })
  const after = await scrape()
  const text = lastText
  const read = 'http_server_request_duration_seconds_count{method="GET",route="/users/:user_id",status_code="200"}'
  const limited = 'http_server_request_duration_seconds_count{method="GET",route="/users/:user_id",status_code="429"}'
  t.equal(value(after, read) - value(before, read), 3, 'the three reads within the limit, under the route template')
  t.equal(value(after, limited) - value(before, limited), 2, 'the two past it')
  t.equal(value(after, 'roster_rate_limit_refusals_total{route="/users/:user_id"}'), 2, 'counted as refusals')
  t.equal(value(after, 'http_server_request_duration_seconds_count{method="GET",route="unmatched",status_code="404"}'), 1, 'no route: one series, not one per URL')
  const series = 'method="GET",route="/users/:user_id",status_code="200"'
  const buckets = [...after].filter(([key]) => key.startsWith('http_server_request_duration_seconds_bucket{') && key.endsWith(`,${series}}`))
  t.equal(buckets.length, 15, 'a histogram with 14 bounds and +Inf')
  t.ok(buckets.every(([, n], i) => i === 0 || n >= buckets[i - 1]![1]), 'cumulative buckets')
  t.equal(value(after, `http_server_request_duration_seconds_bucket{le="+Inf",${series}}`), value(after, read), '+Inf counts every observation')
  t.ok(value(after, `http_server_request_duration_seconds_sum{${series}}`) > 0, 'and their sum')
  t.equal(text.match(/^# TYPE http_server_request_duration_seconds histogram$/gm)?.length, 1, 'declared once, as a histogram')
  t.ok(value(after, 'process_resident_memory_bytes') > 0, 'process memory')
  t.ok(after.has('nodejs_eventloop_lag_p99_seconds'), 'event-loop lag')
  t.ok(after.has('process_cpu_seconds_total'), 'CPU')
})

t.test('logins by result', async (t) => {
  const { app, scrape } = await withMetrics(t, { LOGIN_MAX_FAILURES: '2' })
  const user = await newUser(app)
  await login(app, ADMIN.email, ADMIN.password)
  await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'wrong-password-1' } })
  await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'wrong-password-1' } })
  const throttled = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'wrong-password-1' } })
  t.equal(throttled.statusCode, 429)
  const admin = await login(app, ADMIN.email, ADMIN.password)
  const banned = await newUser(app)
  t.equal((await app.inject({ method: 'PUT', url: `/users/${banned.id}/status`, headers: bearer(admin), payload: { status: 'BANNED' } })).statusCode, 200)
  const refused = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: banned.email, password: banned.password } })
  t.equal(refused.json<{ code: string }>().code, 'USER_BANNED')
  const samples = await scrape()
  t.equal(value(samples, 'roster_logins_total{result="banned"}'), 1, 'a banned user\'s login')
  t.equal(value(samples, 'roster_logins_total{result="success"}'), 2 + 2, 'successes (newUser logs in once)')
  t.equal(value(samples, 'roster_logins_total{result="invalid_credentials"}'), 2, 'wrong passwords')
  t.equal(value(samples, 'roster_logins_total{result="throttled"}'), 1, 'refused by the failure limit')
})

t.test('the outbox: pending mail, the age of the oldest, delivery results', async (t) => {
  const { app, scrape } = await withMetrics(t)
  // The deliverer is stopped, so that the sign-up's verification mail waits.
  await app.outbox.stop()
  await newUser(app)
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const waiting = await scrape()
  t.ok(value(waiting, 'roster_outbox_pending{kind="mail"}') >= 1, `mail waits (${value(waiting, 'roster_outbox_pending{kind="mail"}')})`)
  t.ok(value(waiting, 'roster_outbox_oldest_age_seconds{kind="mail"}') >= 1, 'for a second or more')
  app.outbox.start() // the log transport (no SMTP_URL) takes it at once
  let sent = await scrape()
  // One scrape reads the counters before the gauges' queries end, and leaves out a gauge whose read failed (a busy
  // database): wait for both a read of zero and the count.
  const delivered = 'roster_outbox_deliveries_total{kind="mail",result="delivered"}'
  for (let i = 0; i < 50 && (sent.get('roster_outbox_pending{kind="mail"}') !== 0 || value(sent, delivered) < 1); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    sent = await scrape()
  }
  t.equal(value(sent, 'roster_outbox_pending{kind="mail"}'), 0, 'none waits once delivered')
  t.equal(value(sent, 'roster_outbox_oldest_age_seconds{kind="mail"}'), 0)
  t.ok(value(sent, delivered) >= 1, 'delivered, counted')
})

t.test('the outbox by kind: webhook deliveries waiting, delivered and retried', async (t) => {
  const receiver = await Receiver.start(t)
  const { app, scrape } = await withMetrics(t, { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
  const admin = bearer(await login(app, ADMIN.email, ADMIN.password))
  const created = await app.inject({ method: 'POST', url: '/webhooks', headers: admin, payload: { url: receiver.url, events: ['user.created'] } })
  t.equal(created.statusCode, 201)
  let refuse = true
  receiver.answer = () => ({ status: refuse ? 500 : 204 })
  const before = await scrape()
  t.equal(value(before, 'roster_outbox_deliveries_total{kind="webhook",result="delivered"}'), 0, 'counted from zero')
  await newUser(app)
  await until('a refused attempt', () => receiver.received.length >= 1)
  let samples = await scrape()
  const pending = 'roster_outbox_pending{kind="webhook"}'
  for (let i = 0; i < 50 && (value(samples, 'roster_outbox_deliveries_total{kind="webhook",result="retried"}') < 1 || !samples.has(pending)); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    samples = await scrape()
  }
  t.ok(value(samples, 'roster_outbox_deliveries_total{kind="webhook",result="retried"}') >= 1, 'a refused attempt is a retry')
  t.equal(samples.get(pending), 1, 'the delivery waits for its retry')
  refuse = false
  const hook = created.json<{ id: number }>().id
  const delivery = (await app.inject({ url: `/webhooks/${hook}/deliveries`, headers: admin })).json<{ items: Array<{ id: number }> }>().items[0]!.id
  t.equal((await app.inject({ method: 'POST', url: `/webhooks/${hook}/deliveries/${delivery}/retry`, headers: admin })).statusCode, 202)
  for (let i = 0; i < 50 && (value(samples, 'roster_outbox_deliveries_total{kind="webhook",result="delivered"}') < 1 || samples.get(pending) !== 0); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    samples = await scrape()
  }
  t.equal(value(samples, 'roster_outbox_deliveries_total{kind="webhook",result="delivered"}'), 1, 'then delivered')
  t.equal(samples.get(pending), 0)
})

t.test('the database pool: its size, what is in use, waits', { skip: ENGINE !== 'mysql' && 'MySQL only: the embedded engine has no pool' }, async (t) => {
  const { app, scrape } = await withMetrics(t, { DB_POOL_SIZE: '2' })
  const user = await newUser(app)
  await Promise.all(Array.from({ length: 20 }, () => app.inject({ method: 'GET', url: `/users/${user.id}`, headers: bearer(user.token) })))
  let samples = await scrape()
  // The mail deliverer may hold one for a moment (the sign-up's verification mail); none stays held.
  for (let i = 0; i < 50 && value(samples, 'roster_db_pool_connections{state="in_use"}') > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    samples = await scrape()
  }
  t.equal(value(samples, 'roster_db_pool_connections{state="max"}'), 2, 'DB_POOL_SIZE')
  t.equal(value(samples, 'roster_db_pool_connections{state="in_use"}'), 0, 'none held once every request is answered')
  t.ok(value(samples, 'roster_db_pool_waits_total') > 0, `twenty requests at once on two connections waited (${value(samples, 'roster_db_pool_waits_total')})`)
})

t.test('the metrics are on their own port only; 0 turns them off', async (t) => {
  const { app, url } = await withMetrics(t)
  t.equal((await app.inject({ method: 'GET', url: '/metrics' })).statusCode, 404, 'not on the API\'s port')
  t.equal((await fetch(url.replace('/metrics', '/other'))).status, 404, 'nothing else on the metrics port')
  const off = await build(t, { env: { METRICS_PORT: '0' } })
  await off.listenMetrics()
  await off.inject({ method: 'GET', url: '/health/live' })
  t.notMatch(await off.metrics.registry.metrics(), /^http_server_request_duration_seconds_count/m, 'METRICS_PORT=0: answers are not timed')
})
