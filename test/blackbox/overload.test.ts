import { join } from 'node:path'
import t from 'tap'
import { assertRecovered, root, startBuilt } from './service.js'

/**
 * The built service under faults played inside it (test/blackbox/fixtures/faults.mjs): load shed while its event
 * loop lags, and the process-level policy for an unexpected error.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('load shedding: never at start, and shed requests logged as a count, not a stack each', async (t) => {
  // A threshold of 150 ms: a start's migrations and schema compiling, which block the loop longer, must not count
  // (a busy test machine's own delays stay well under it).
  const service = await startBuilt(t, { LOG_LEVEL: 'info', MAX_EVENT_LOOP_DELAY_MS: '150', ROSTER_TEST_FAULT: 'lag' }, ['--import', join(root, 'test/blackbox/fixtures/faults.mjs')])
  t.notOk(service.startup.includes(503), `no 503 while starting (statuses seen: ${[...new Set(service.startup)].join(', ')})`)
  const baseline = service.usage()
  // Two seconds of lag, with requests arriving throughout.
  service.child.kill('SIGUSR2')
  const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => sleep(i * 50).then(async () => {
    try {
      const res = await fetch(`${service.base}/openapi.json`)
      await res.arrayBuffer()
      return res.status
    } catch { return 0 }
  })))
  t.ok(statuses.includes(503), `requests were shed while the loop lagged (${statuses.filter((s) => s === 503).length} of 40)`)
  t.ok(statuses.every((s) => s === 200 || s === 503), 'each answered 200 or 503')
  let back = false
  for (let i = 0; i < 50 && !back; i++) {
    back = (await fetch(`${service.base}/health/ready`)).status === 200
    if (!back) await sleep(100)
  }
  t.ok(back, 'ready again once the loop is free')
  for (let i = 0; i < 120 && !service.lines.some((l) => l.includes('overloaded: requests answered 503')); i++) await sleep(100)
  const errors = service.lines.filter((l) => /"level":(50|60)/.test(l))
  t.same(errors, [], 'no error lines for shed requests')
  const report = service.lines.filter((l) => l.includes('overloaded: requests answered 503'))
  t.ok(report.length >= 1 && report.length <= 2, `the shedding is reported as a count (${report.length} line(s))`)
  t.notOk(report.some((l) => l.includes('"stack"')), 'with no stack')
  await assertRecovered(t, service, baseline, 'after shedding')
})

t.test('an unexpected error is logged at fatal and ends the process with status 1, for its supervisor to restart', async (t) => {
  for (const fault of ['throw', 'reject']) {
    const service = await startBuilt(t, { LOG_LEVEL: 'info', ROSTER_TEST_FAULT: fault }, ['--import', join(root, 'test/blackbox/fixtures/faults.mjs')])
    service.child.kill('SIGUSR2')
    t.equal(await service.exited, 1, `${fault}: exit status 1`)
    const fatal = service.lines.find((l) => l.includes('"level":60'))
    t.ok(fatal, `${fault}: a fatal line`)
    t.match(fatal ?? '', /played by the test/, `${fault}: with the error`)
    t.match(fatal ?? '', /supervisor restarts/, `${fault}: saying what happens next`)
  }
})
