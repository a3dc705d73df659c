import t from 'tap'
import { DURATION_BUCKETS, Metrics } from '../../src/metrics/metrics.js'

t.test('the duration histogram as /metrics writes it: the declared bounds, cumulative, labels escaped', async (t) => {
  const metrics = new Metrics()
  // On a bound, between bounds, past the last, and zero; three series, one of them with a label to escape.
  const observations: Array<[string, string, number, number]> = [
    ['GET', '/users/:user_id', 200, 0.005], ['GET', '/users/:user_id', 200, 0.0051], ['GET', '/users/:user_id', 200, 0],
    ['GET', '/users/:user_id', 200, 12], ['POST', '/users', 201, 0.02], ['GET', 'un"matched', 404, 0.001]
  ]
  for (const [method, route, status, seconds] of observations) metrics.answered(method, route, status, seconds)
  const lines = (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('http_server_request_duration_seconds'))
  const series = 'method="GET",route="/users/:user_id",status_code="200"'
  const buckets = lines.filter((l) => l.startsWith('http_server_request_duration_seconds_bucket{') && l.includes(series))
  t.same(buckets.map((l) => /le="([^"]+)"/.exec(l)?.[1]), [...DURATION_BUCKETS.map(String), '+Inf'], 'the declared bounds, then +Inf')
  const count = (le: string) => Number(buckets.find((l) => l.includes(`le="${le}"`))?.split(' ')[1])
  t.equal(count('0.005'), 2, 'a duration on a bound falls within it, and zero too')
  t.equal(count('0.01'), 3, 'cumulative')
  t.equal(count('10'), 3, 'past the last bound: only in +Inf')
  t.equal(count('+Inf'), 4)
  t.ok(lines.includes(`http_server_request_duration_seconds_count{${series}} 4`))
  t.ok(lines.includes(`http_server_request_duration_seconds_sum{${series}} 12.0101`))
  t.ok(lines.includes('http_server_request_duration_seconds_count{method="POST",route="/users",status_code="201"} 1'))
  t.ok(lines.includes('http_server_request_duration_seconds_count{method="GET",route="un\\"matched",status_code="404"} 1'), 'a quote escaped')
})
