import t from 'tap'
import { createDatabase } from '../../src/database/index.js'
import { ADMIN } from '../helpers.js'
import { call, rawExchange, startBuilt, type RunningService } from './service.js'

const LINES = 6000

async function adminAuth(service: RunningService) {
  const login = await call(service, 'POST', '/auth/tokens', { body: { email: ADMIN.email, password: ADMIN.password } })
  return { authorization: `Bearer ${String(login.body.token)}` }
}

/**
 * The built service killed in the middle of an import: the next instance started on the same database takes the
 * import over once the killed one's lease has run out, and finishes it with every line applied once.
 */
t.test('an import survives a kill of the service mid-way: resumed, nobody twice, nothing lost', async (t) => {
  const env = { IMPORT_LEASE_SECONDS: '2' }
  const first = await startBuilt(t, env)
  const auth = await adminAuth(first)
  const file = Array.from({ length: LINES }, (_, i) => JSON.stringify({ external_id: `k-${i}`, name: `Killed ${i}`, email: `k${i}@example.com` }))
    .join('\n')
  const posted = await fetch(`${first.base}/imports`, { method: 'POST', headers: { ...auth, 'content-type': 'application/x-ndjson' }, body: file })
  t.equal(posted.status, 202)
  const id = (await posted.json() as { id: number }).id

  let seen = 0
  for (let i = 0; i < 2000 && seen === 0; i++) {
    seen = Number((await call(first, 'GET', `/imports/${id}`, { headers: auth })).body.processed)
    if (seen === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  }
  first.child.kill('SIGKILL')
  t.equal(await first.exited, 'SIGKILL')
  const { db } = createDatabase({ url: first.databaseUrl })
  t.teardown(() => db.destroy())
  const atKill = await db.selectFrom('imports').select(['processed', 'status']).where('id', '=', id).executeTakeFirstOrThrow()
  t.ok(atKill.processed > 0 && atKill.processed < LINES, `killed mid-way (${atKill.processed} of ${LINES} lines done)`)

  const second = await startBuilt(t, { ...env, DATABASE_URL: first.databaseUrl })
  const auth2 = await adminAuth(second)
  let body: Record<string, unknown> = {}
  for (let i = 0; i < 600; i++) {
    body = (await call(second, 'GET', `/imports/${id}`, { headers: auth2 })).body
    if (body.status === 'succeeded' || body.status === 'failed') break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.match(body, { status: 'succeeded', lines: LINES, processed: LINES, created: LINES, failed: 0, skipped: 0 })
  const users = await db.selectFrom('users').select((eb) => eb.fn.countAll().as('n')).where('external_id', 'like', 'k-%').executeTakeFirstOrThrow()
  t.equal(Number(users.n), LINES, 'every line applied once')
  const events = await db.selectFrom('events').select((eb) => eb.fn.countAll().as('n'))
    .where('type', '=', 'user.created').where('request_id', 'is not', null).executeTakeFirstOrThrow()
  t.ok(Number(events.n) >= LINES, 'a user.created for each')
  const staged = async () => Number((await db.selectFrom('import_lines').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  for (let i = 0; i < 100 && await staged() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(await staged(), 0, 'the staged lines are dropped once done')
  t.ok(second.running(), 'the same process is still running')
  t.same(second.lines.filter((line) => /could not be worked on/.test(line)), [], 'no batch failed')
})

/**
 * A client that breaks off a multipart upload after its file, in the part that follows: the staged import is dropped
 * at once (its dry_run, if that part was one, never read), and the service goes on.
 */
t.test('a multipart upload broken off after its file leaves no import behind', async (t) => {
  const service = await startBuilt(t)
  const auth = await adminAuth(service)
  const boundary = 'roster-broken-off'
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="u.ndjson"\r\nContent-Type: application/x-ndjson\r\n\r\n` +
    `${JSON.stringify({ email: 'broken-off@example.com' })}\n\r\n--${boundary}\r\nContent-Disposition: form-data; name="dry_run"\r\n\r\ntr`
  await rawExchange(service.port, (socket) => {
    socket.write(`POST /imports HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth.authorization}\r\n` +
      `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${head.length + 1000}\r\n\r\n${head}`)
    setTimeout(() => socket.destroy(), 300)
  }, 1_000)
  // An upload still being received is not listed: the table tells whether it was dropped.
  const { db } = createDatabase({ url: service.databaseUrl })
  t.teardown(() => db.destroy())
  const held = async () => Number((await db.selectFrom('imports').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  for (let i = 0; i < 50 && await held() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(await held(), 0, 'the staged import is dropped at once')
  t.same((await call(service, 'GET', '/users?email=broken-off%40example.com', { headers: auth })).body.items, [], 'nobody imported')
  t.ok(service.running(), 'the same process is still running')
})
