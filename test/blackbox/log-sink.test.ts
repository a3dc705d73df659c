import { spawn } from 'node:child_process'
import t, { type Test } from 'tap'
import { ENGINE, freePort, sharedDatabase } from '../helpers.js'
import { entry, root, startArgs } from './service.js'

/**
 * A log sink that stops reading, which only a process can show: the service keeps answering, counts what it drops,
 * sends what waited once the sink reads again, and still stops in time if the sink never does. (Stopping under load
 * and with writes in flight: shutdown.test.ts.)
 */

// What is tested is the service's standard output, the same whichever database it runs on: once, on the SQLite leg.
const skip = ENGINE === 'mysql' && 'the log sink is the same on either engine: tested on the SQLite leg'

/**
 * The built service as npm start runs it, its standard output a pipe nobody reads (it fills after about 64 KiB),
 * answering 50 requests a round, 60 rounds by default: 3000 requests whose access lines make about 1.6 MB, past the
 * pipe's buffer and past what is kept waiting for it. Standard error is gathered.
 */
async function stuckSink(t: Test, rounds = 60) {
  const url = await sharedDatabase(t)
  const port = await freePort()
  const child = spawn(process.execPath, [...startArgs(), entry], {
    cwd: root, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PORT: String(port), METRICS_PORT: '0', DATABASE_URL: url, LOG_LEVEL: 'info', MAX_EVENT_LOOP_DELAY_MS: '0', RATE_LIMIT_MAX: '100000000' }
  })
  child.stdout.pause()
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  t.teardown(() => { child.kill('SIGKILL') })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 200; i++) {
    if (await fetch(`${base}/health/live`).then((r) => r.ok, () => false)) break
    await new Promise((r) => setTimeout(r, 100))
  }
  const long = `/health/live?${'x'.repeat(400)}`
  let answered = 0
  for (let round = 0; round < rounds; round++) {
    const codes = await Promise.all(Array.from({ length: 50 }, () => fetch(base + long).then((r) => r.status, () => 0)))
    answered += codes.filter((c) => c > 0).length
  }
  t.equal(answered, rounds * 50, 'every request answered with the sink stuck')
  const started = Date.now()
  t.equal((await fetch(`${base}/health/live`)).status, 200)
  t.ok(Date.now() - started < 1000, `and at once (${Date.now() - started} ms)`)
  return { child, base, long, exited, stderr: () => stderr }
}

t.test('a log sink that stops reading never stops the service; dropped lines are counted', { skip }, async (t) => {
  const { child, base, long, exited, stderr } = await stuckSink(t)
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += d.toString() })
  child.stdout.resume()
  const until = Date.now() + 15_000
  while (!/log lines dropped/.test(out) && Date.now() < until) {
    await fetch(`${base}/health/live`).catch(() => {})
    await new Promise((r) => setTimeout(r, 100))
  }
  t.match(out, /log lines dropped/, 'once the sink reads again, the loss is reported')
  // Stopped at once, with up to a mebibyte still waiting: a sink that reads is waited for, however slowly.
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'and it still stops cleanly')
  // Every access line of the 3000 requests was either written or counted in a report: none is lost uncounted.
  const lines = out.split('\n').flatMap((l) => {
    try {
      return [JSON.parse(l) as { msg?: string; url?: string; dropped?: number }]
    } catch {
      return []
    }
  })
  const written = lines.filter((l) => l.msg === 'request' && l.url === long).length
  const dropped = lines.filter((l) => l.msg?.startsWith('log lines dropped')).reduce((n, l) => n + (l.dropped ?? 0), 0)
  t.ok(dropped > 0 && written < 3000, `lines were dropped (${dropped})`)
  t.ok(written + dropped >= 3000, `each line written or counted: ${written} written, ${dropped} counted as dropped`)
  t.notMatch(stderr(), /lost at shutdown/, 'nothing was given up on: the sink was reading')
})

t.test('lines a full pipe refused reach the sink once it reads again, with no later line to carry them', { skip }, async (t) => {
  // 300 access lines, about 160 KB: past the pipe's 64 KiB, within what is kept waiting (nothing dropped).
  const { child, long } = await stuckSink(t, 6)
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += d.toString() })
  child.stdout.resume()
  // No request from here on: what waits is tried again every second of itself.
  const count = () => out.split('\n').filter((l) => l.includes(`"url":"${long}"`)).length
  const until = Date.now() + 10_000
  while (count() < 300 && Date.now() < until) await new Promise((r) => setTimeout(r, 100))
  t.equal(count(), 300, 'every line arrives')
  t.notMatch(out, /log lines dropped/, 'none was dropped')
})

t.test('a log sink stuck through the shutdown cannot hold it; what it did not take is said on standard error', { skip }, async (t) => {
  const { child, exited, stderr } = await stuckSink(t)
  const started = Date.now()
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'a clean exit')
  const took = Date.now() - started
  // Patience of 2 s with the app's close, then the exit's own try: well within an orchestrator's grace period.
  t.ok(took < 8000, `without waiting on the sink (${took} ms)`)
  const lost = stderr().split('\n').filter((l) => l.includes('lost at shutdown')).map((l) => JSON.parse(l) as { dropped: number; unwrittenChars: number })
  t.equal(lost.length, 1, 'one line, at exit, says what was lost')
  // What waited (a mebibyte, reports of dropped lines among it) and lines dropped since the last report.
  t.ok(lost[0] && lost[0].unwrittenChars > 1_000_000 && lost[0].dropped >= 0, `what was not written is counted: ${JSON.stringify(lost[0])}`)
})
