import t from 'tap'
import { Collector } from '../tracing/collector.js'
import { until } from '../webhooks/receiver.js'
import { assertRecovered, call, signUp, startBuilt } from './service.js'

/**
 * Traces from the built service as `npm start` runs it: spans reach an OTLP collector over a real socket, batch after
 * batch; when the collector goes away the service keeps answering, and the same process is alive afterwards.
 */
t.test('the built service sends its traces, and lives on when the collector is gone', async (t) => {
  const collector = await Collector.start(t)
  const service = await startBuilt(t, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '200' })
  const baseline = service.usage()
  const user = await signUp(service, 'bb-traced@example.com')
  t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: { ...user.auth, 'x-request-id': 'bb-trace-1' } })).status, 200)
  await until('the request\'s span', () => collector.spans.some((s) => s.attributes['http.request.id'] === 'bb-trace-1'), 15_000)
  t.ok(collector.spans.some((s) => typeof s.attributes['db.system.name'] === 'string'), 'database statements among them')

  await collector.stop()
  for (let i = 0; i < 30; i++) t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).status, 200)
  // Several batches fail to be sent meanwhile.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  await assertRecovered(t, service, baseline, 'with the collector gone')
})
