import { join } from 'node:path'
import t from 'tap'
import { call, root, signUp, startBuilt } from './service.js'

const FIXTURE = join(root, 'test/blackbox/fixtures/tick-feedback.mjs')

/**
 * The built service as `npm start` runs it holds one process.nextTick entry from its start, so that the entries keep
 * one hidden class across full garbage collections at idle moments, which come to every long-running process, and
 * V8's cache for building them stays in place (src/tick-shape.ts). The service answers requests, goes idle, is
 * collected with no entry queued, and an entry made afterwards is compared with the held one by V8 itself.
 */
t.test('the built service keeps nextTick entries on one hidden class across full collections at idle; it lives on', async (t) => {
  const service = await startBuilt(t, {}, ['--allow-natives-syntax', '--expose-gc', '--import', FIXTURE])
  const user = await signUp(service, 'ticks@example.com')
  for (let i = 0; i < 100; i++) t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).status, 200)

  for (const round of [1, 2]) {
    const from = service.lines.length
    service.child.kill('SIGUSR2')
    let report: unknown
    const deadline = Date.now() + 20_000
    while (report === undefined && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      const line = service.lines.slice(from).find((l) => l.startsWith('{"tickShape"'))
      if (line) report = (JSON.parse(line) as { tickShape: unknown }).tickShape
    }
    t.same(report, { heldAtStart: true, sameClassAfterCollection: true }, `round ${round}: held from the start, and the class outlived a full collection`)
    t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).status, 200)
  }
  t.ok(service.running(), 'the same process is still running')
})
