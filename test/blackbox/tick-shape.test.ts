import { closeSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { tempDir } from '../helpers.js'
import { call, root, signUp, startBuilt } from './service.js'

const FIXTURE = join(root, 'test/blackbox/fixtures/tick-feedback.mjs')

/**
 * The built service as `npm start` runs it keeps process.nextTick on V8's fast path across full garbage collections
 * at idle moments, which come to every long-running process (src/tick-shape.ts). The service answers requests, goes
 * idle, is collected with no entry queued, runs nextTick again, and V8 itself prints the state of nextTick's stores.
 * Without the entry src/tick-shape.ts holds they print MEGAMORPHIC here, and stay so. V8 prints through C's stdout,
 * whose blocks reach a file in order, so the service's standard output goes to one.
 */
t.test('the built service keeps nextTick on its fast path across full collections at idle; it lives on', async (t) => {
  const file = join(tempDir(t, 'roster-ticks-'), 'stdout')
  const fd = openSync(file, 'w')
  t.teardown(() => closeSync(fd))
  const service = await startBuilt(t, {}, ['--allow-natives-syntax', '--expose-gc', '--import', FIXTURE], { stdoutFd: fd })
  const user = await signUp(service, 'ticks@example.com')
  for (let i = 0; i < 100; i++) t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).status, 200)

  for (const round of [1, 2]) {
    const from = readFileSync(file, 'utf8').length
    service.child.kill('SIGUSR2')
    let out = ''
    let report: unknown
    const deadline = Date.now() + 20_000
    while (report === undefined && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      out = readFileSync(file, 'utf8').slice(from)
      // V8's last, partly written block can stand in front of it.
      const found = /\{"tickFeedback":\{[^}]*\}\}/.exec(out)?.[0]
      if (found) report = (JSON.parse(found) as { tickFeedback: unknown }).tickFeedback
    }
    t.same(report, { printed: true, held: true }, `round ${round}: the service holds a nextTick entry`)
    const slots = [...out.matchAll(/DefineKeyedOwnPropertyInLiteral (\w+)/g)].map((m) => m[1]!)
    t.ok(slots.length >= 4, `round ${round}: V8 printed nextTick's stores (${slots.join(', ')})`)
    t.same(slots.filter((state) => state === 'MEGAMORPHIC'), [], `round ${round}: none gave up after a full collection`)
    t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).status, 200)
  }
  t.ok(service.running(), 'the same process is still running')
})
