import { spawn } from 'node:child_process'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { root, startBuilt } from './service.js'

/**
 * Stopping and logging, which only a process can show: SIGTERM under load and with writes in flight, and the batched
 * log complete however the process ends. (A log sink that stops reading: log-sink.test.ts.)
 */
/**
 * The built service as `npm start` runs it, on a fresh shared database, waited for until it is ready. `onLine`
 * receives each line it writes; `exited` settles once the process has ended.
 */
async function startService(t: Test, env: Record<string, string>, onLine: (line: string) => void = () => {}) {
  const service = await startBuilt(t, { LOG_LEVEL: 'info', ...env }, [], { onLine })
  return { child: service.child, base: service.base, up: service.running(), exited: service.exited, stderr: () => service.lines.join('\n') }
}

t.test('SIGTERM under load finishes in-flight requests, then exits cleanly', async (t) => {
  // At debug level the service logs every request it receives: count the logins it has in hand.
  let received = 0
  // Eight logins of one account from one client at once: the login guard lets that many checks be in flight.
  const service = await startService(t, { LOG_LEVEL: 'debug', LOGIN_MAX_FAILURES: '8' }, (line) => {
    if (line.includes('"request received"') && line.includes('/auth/tokens')) received++
  })
  const { child, base, exited } = service
  t.ok(service.up, 'the service started')
  // Logins take tens of milliseconds each (argon2id, at most four at a time): the signal comes once the service
  // has received all eight, so they are in flight when it arrives.
  const inflight = Array.from({ length: 8 }, () => fetch(`${base}/auth/tokens`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'root@example.com', password: 'root-password-1' })
  }).then((r) => r.status, (e: Error) => e.message))
  for (let i = 0; i < 500 && received < 8; i++) await new Promise((r) => setTimeout(r, 10))
  t.equal(received, 8, 'the service has received all eight logins')
  child.kill('SIGTERM')
  const statuses = await Promise.all(inflight)
  t.same(statuses, Array(8).fill(201), 'every in-flight request completed')
  t.equal(await exited, 0, `clean exit (${service.stderr().slice(0, 300)})`)
  await t.rejects(fetch(`${base}/health/live`), 'no longer listening')
})

t.test('at info level the buffered access log is complete when the service stops', async (t) => {
  const lines: Array<{ msg?: string; url?: string; statusCode?: number }> = []
  const { child, base, up, exited } = await startService(t, { LOG_LEVEL: 'info' }, (line) => lines.push(JSON.parse(line)))
  t.ok(up, 'the service started')
  // Far fewer lines than the 4 KiB buffer holds, then a stop well within the one-second flush: only the flush on
  // close can have written them.
  for (let i = 0; i < 5; i++) await fetch(`${base}/health/live?n=${i}`)
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'clean exit')
  const logged = lines.filter((l) => l.msg === 'request' && l.url?.startsWith('/health/live?n='))
  t.equal(logged.length, 5, 'one line per request, none lost in the buffer')
  t.ok(logged.every((l) => l.statusCode === 200))
  t.ok(lines.some((l) => l.msg?.startsWith('shutting down')), 'the shutdown is logged too')
})

t.test('batched log lines reach stdout however the process ends', async (t) => {
  const script = (ending: string) => [
    `import { stdoutDestination } from ${JSON.stringify(join(root, 'dist/src/logging/destination.js'))}`,
    'const out = stdoutDestination()',
    'for (let i = 1; i <= 300; i++) out.write(`{"line":${i},"pad":"${"x".repeat(40)}"}\\n`)', // three batches and a part
    ending
  ].join('\n')
  const endings = {
    'process.exit()': 'process.exit(0)',
    'the event loop running dry': '',
    'an uncaught exception': 'setImmediate(() => { throw new Error("boom") })',
    'a late line after close()': 'out.close(); out.write(`{"line":301}\\n`)'
  }
  for (const [name, ending] of Object.entries(endings)) {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script(ending)], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    await new Promise((resolve) => child.on('close', resolve))
    const lines = out.trim().split('\n').map((l) => JSON.parse(l).line)
    const expected = Array.from({ length: name.includes('late') ? 301 : 300 }, (_, i) => i + 1)
    t.same(lines, expected, `every line, in order, after ${name}`)
  }
})

// Each of these waits out a ten-second deadline with nothing to do meanwhile: they wait side by side.
t.test('SIGTERM with writes in flight: each answers 201 or 503, nothing errs, and the pool closes last', async (t) => {
  const errors: string[] = []
  let received = 0
  const service = await startService(t, { LOG_LEVEL: 'debug' }, (line) => {
    if (line.includes('"request received"') && line.includes('/users')) received++
    if (/"level":(50|60)/.test(line)) errors.push(line)
  })
  const { child, base, exited } = service
  const writes = Array.from({ length: 10 }, (_, i) => fetch(`${base}/users`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Late', email: `late${i}@example.com`, password: 'password-123' })
  }).then((r) => r.status, (e: Error) => e.message))
  for (let i = 0; i < 500 && received < 10; i++) await new Promise((r) => setTimeout(r, 10))
  child.kill('SIGTERM')
  const late = await Promise.all(Array.from({ length: 5 }, () => fetch(`${base}/users`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Later', email: `later${Math.random()}@example.com`, password: 'password-123' })
  }).then((r) => r.status, () => 'refused')))
  const statuses = await Promise.all(writes)
  t.ok(statuses.every((s) => s === 201 || s === 503), `in-flight writes: ${statuses.join(', ')}`)
  // Sent as the signal is delivered: served before the service acts on it (201), refused while it closes (503),
  // or not accepted once it stopped listening. Never a 500.
  t.ok(late.every((s) => s === 201 || s === 503 || s === 'refused'), `writes racing the signal: ${late.join(', ')}`)
  t.equal(await exited, 0, 'clean exit')
  t.same(errors, [], 'no error was logged while stopping')
})
