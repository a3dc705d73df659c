import SQLite from 'better-sqlite3'
import t from 'tap'
import { ENGINE } from '../helpers.js'
import { call, signUp, startBuilt } from './service.js'

/** The longest the built service took to answer each of `paths` (a GET, 200 expected), probed every 50 ms for `ms`. */
async function slowestAnswer(service: Awaited<ReturnType<typeof startBuilt>>, paths: string[], headers: Record<string, string>, ms: number): Promise<number> {
  let slowest = 0
  for (const until = Date.now() + ms; Date.now() < until;) {
    for (const path of paths) {
      const started = Date.now()
      const answer = await call(service, 'GET', path, { headers })
      if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}`)
      slowest = Math.max(slowest, Date.now() - started)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return slowest
}

/**
 * Another process writing to the embedded file (an operator's shell, a script) holds SQLite's one write lock for as
 * long as it likes. The synchronous driver must not wait for it with the whole process, nor may a waiting write hold
 * the one connection: the built service, started as `npm start` starts it, answers its probes and reads meanwhile,
 * its writes (in a transaction, and outside one: an idempotency key's) wait for the lock and land once it is let go,
 * and past the wait (5 s) they are answered 503 and change nothing. The same process lives on.
 */
t.test('another process holding the embedded file\'s write lock stops no other answer; writes wait for it, then 503', { skip: ENGINE !== 'sqlite' && 'SQLite only' }, async (t) => {
  const service = await startBuilt(t)
  const user = await signUp(service, 'write-lock@example.com')
  const other = new SQLite(service.databaseUrl.slice('sqlite:'.length))
  t.teardown(() => other.close())
  const name = async () => (await call(service, 'GET', `/users/${user.id}`, { headers: user.auth })).body.name

  other.exec('begin immediate')
  const renamed = call(service, 'PUT', `/users/${user.id}/name`, { headers: user.auth, body: { name: 'Waited' } })
  const keyed = call(service, 'POST', '/users', {
    headers: { 'idempotency-key': '6d0c7a52-0000-4000-8000-000000000001' },
    body: { name: 'Keyed', email: 'keyed-under-lock@example.com', password: 'password-123' }
  })
  const slowest = await slowestAnswer(service, ['/health/live', '/health/ready', `/users/${user.id}/emails`], user.auth, 2000)
  t.ok(slowest < 500, `probes and reads answered within ${slowest} ms at worst while the lock was held (2 s) and two writes waited`)
  t.equal(await name(), 'Probe', 'from before the held writes')
  other.exec('commit')
  t.equal((await renamed).status, 200, 'the write in a transaction waited for the lock and landed')
  t.equal((await keyed).status, 201, 'so did the one whose idempotency key is written outside a transaction')
  t.equal(await name(), 'Waited')

  other.exec('begin immediate')
  const started = Date.now()
  const refused = await call(service, 'PUT', `/users/${user.id}/name`, { headers: user.auth, body: { name: 'Never' } })
  const waited = Date.now() - started
  other.exec('commit')
  t.equal(refused.status, 503, `held past the wait, the write is refused (after ${waited} ms)`)
  t.equal(refused.headers.get('content-type'), 'application/problem+json')
  t.equal(refused.body.code, 'UNAVAILABLE')
  t.ok(refused.headers.get('retry-after'), 'with Retry-After')
  t.ok(waited >= 4500, 'after waiting its 5 s')
  t.equal(await name(), 'Waited', 'and changed nothing')

  t.equal((await call(service, 'PUT', `/users/${user.id}/name`, { headers: user.auth, body: { name: 'After' } })).status, 200, 'writes go on once it is let go')
  t.equal((await call(service, 'GET', '/health/ready')).status, 200)
  t.ok(service.running(), 'the same process is still running')
})
