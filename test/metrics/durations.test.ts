import { Histogram, Registry } from 'prom-client'
import t from 'tap'
import { DurationHistogram } from '../../src/metrics/durations.js'

t.test('the duration histogram writes what prom-client\'s own histogram writes for the same observations', async (t) => {
  const bounds = [0.005, 0.01, 0.025, 0.05, 0.1, 1]
  const ours = new Registry()
  const theirs = new Registry()
  const durations = new DurationHistogram('http_server_request_duration_seconds', 'Duration of HTTP requests', bounds)
  ours.registerMetric(durations.asMetric())
  const reference = new Histogram({
    name: 'http_server_request_duration_seconds', help: 'Duration of HTTP requests',
    labelNames: ['method', 'route', 'status_code'] as const, buckets: bounds, registers: [theirs]
  })
  // On a bound, between bounds, past the last, and zero; three series, one of them with a label to escape.
  const observations: Array<[string, string, number, number]> = [
    ['GET', '/users/:user_id', 200, 0.005], ['GET', '/users/:user_id', 200, 0.0051], ['GET', '/users/:user_id', 200, 0],
    ['GET', '/users/:user_id', 200, 3.5], ['POST', '/users', 201, 0.02], ['GET', '/users/:user_id', 404, 0.1],
    ['GET', 'un"matched', 404, 0.001]
  ]
  for (const [method, route, status, seconds] of observations) {
    durations.observe(method, route, status, seconds)
    reference.observe({ method, route, status_code: String(status) }, seconds)
  }
  t.equal(await ours.metrics(), await theirs.metrics(), 'the same exposition, line for line')
  durations.reset()
  reference.reset()
  t.equal(await ours.metrics(), await theirs.metrics(), 'and the same after a reset')
})
