import t from 'tap'
import { describeSoak, runSoak, SOAK_BOUNDS } from '../blackbox/soak.js'

/**
 * The soak, bounded for CI (SOAK_SECONDS, 30 by default, on each engine): mixed traffic against the built service
 * with its faults injected. `npm run soak` runs a longer one by hand.
 */
t.test('a bounded soak: no 5xx beyond the injected faults, no restart, memory that stops growing, a responsive loop', async (t) => {
  const seconds = Number(process.env.SOAK_SECONDS ?? 30)
  const report = await runSoak(t, { seconds, clients: 8, log: (line) => t.comment(line) })
  for (const line of describeSoak(report)) t.comment(line)
  t.ok(report.requests > seconds * 20, `traffic flowed (${report.requests} requests)`)
  t.same(report.unexpected.slice(0, 10), [], 'no 5xx, and no failed request, outside the injected faults')
  t.notOk(report.restarted, 'the same process ran throughout')
  t.ok(report.rssMb.length >= seconds / 3, `memory sampled (${report.rssMb.length} samples)`)
  t.ok(report.rssGrowthMb <= SOAK_BOUNDS.rssGrowthMb, `resident memory stopped growing (${report.rssGrowthMb} MiB from the second quarter to the last, at most ${SOAK_BOUNDS.rssGrowthMb})`)
  t.ok(report.heapGrowthMb <= SOAK_BOUNDS.heapGrowthMb, `the live heap stopped growing (${report.heapGrowthMb} MiB, at most ${SOAK_BOUNDS.heapGrowthMb})`)
  t.ok(report.loopP99Ms <= SOAK_BOUNDS.loopP99Ms, `event loop p99 ${report.loopP99Ms.toFixed(1)} ms beyond an idle process's (at most ${SOAK_BOUNDS.loopP99Ms}; the idle one's own ${report.hostLoopP99Ms.toFixed(1)} ms)`)
  t.ok(report.mailsDelivered > 0, `mail delivered through the SMTP outage (${report.mailsDelivered})`)
})
