import t from 'tap'
import { ENGINE } from '../helpers.js'
import { call, signUp, startBuilt } from './service.js'

/**
 * The metrics of the built service as `npm start` runs it, scraped over a socket as Prometheus scrapes them: they
 * move with the traffic, the API's port does not serve them, and the process is alive after scrapes under load.
 */
const sample = (text: string, key: string) => Number(new RegExp(`^${key.replace(/[{}"=.]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN)

t.test('GET /metrics on METRICS_PORT moves with the traffic; the process lives on', async (t) => {
  const service = await startBuilt(t, { LOG_LEVEL: 'warn' })
  const first = await fetch(service.metricsUrl)
  t.equal(first.status, 200, 'the metrics answer on their own port')
  t.match(first.headers.get('content-type'), /^text\/plain/)
  t.equal((await call(service, 'GET', '/metrics')).status, 404, 'and not on the API\'s')
  const user = await signUp(service, 'metrics-probe@example.com', { 'x-request-id': 'bb-metrics-1' })
  // Reads under way while Prometheus scrapes, five times over.
  const reads = Array.from({ length: 200 }, () => call(service, 'GET', `/users/${user.id}`, { headers: user.auth }))
  const scrapes = Array.from({ length: 5 }, () => fetch(service.metricsUrl).then((r) => r.text()))
  t.ok((await Promise.all(reads)).every((r) => r.status === 200), 'every read answered')
  t.ok((await Promise.all(scrapes)).every((text) => text.includes('http_server_request_duration_seconds')), 'every scrape answered')
  const text = await (await fetch(service.metricsUrl)).text()
  t.equal(sample(text, 'http_server_request_duration_seconds_count{method="GET",route="/users/:user_id",status_code="200"}'), 200, 'the 200 reads, by route template')
  t.equal(sample(text, 'http_server_request_duration_seconds_count{method="POST",route="/users",status_code="201"}'), 1, 'the sign-up')
  t.ok(sample(text, 'roster_logins_total{result="success"}') >= 1, 'the login')
  t.ok(sample(text, 'process_resident_memory_bytes') > 10_000_000, 'the process\'s memory')
  t.ok(text.includes('roster_outbox_pending{kind="mail"}') && text.includes('roster_outbox_pending{kind="webhook"}'), 'the outbox, by kind')
  if (ENGINE === 'mysql') t.ok(sample(text, 'roster_db_pool_connections{state="max"}') > 0, 'the pool')
  t.equal((await call(service, 'GET', '/health/ready')).status, 200)
  t.ok(service.running(), 'the same process is still running')
})
