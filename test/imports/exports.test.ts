import { hash as bcrypt } from '@node-rs/bcrypt'
import t, { type Test } from 'tap'
import { adminUser, build, markVerified, newUser, session, sharedDatabase, type TestUser } from '../helpers.js'

const FAST = { imports: { pollMs: 20 } }

interface Line {
  external_id: string | null; name: string; emails: Array<{ address: string; verified: boolean; primary: boolean }>
  password_hash?: string | null; status: string; role: string; created_at: string
}

/** An app on a database file of its own (an export reads it through a connection of its own), listening on a port. */
async function running(t: Test, env: Record<string, string> = {}) {
  const app = await build(t, { ...FAST, url: await sharedDatabase(t), env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (!address || typeof address === 'string') throw new Error('not listening')
  const admin = await adminUser(app)
  return { app, admin, base: `http://127.0.0.1:${address.port}` }
}

async function waitFor(base: string, admin: TestUser, id: number) {
  for (let i = 0; i < 1000; i++) {
    const body = await (await fetch(`${base}/imports/${id}`, { headers: admin.headers })).json() as { status: string; created: number; skipped: number; failed: number }
    if (body.status === 'succeeded' || body.status === 'failed') return body
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error('the import did not end')
}

const users = async (base: string, admin: TestUser) => {
  const lines = (await (await fetch(`${base}/exports/users`, { headers: admin.headers })).text()).trim().split('\n')
  return lines.map((l) => JSON.parse(l) as Line).map(({ password_hash: _hash, ...rest }) => rest)
}

t.test('an export of one instance imported into an empty one gives the same users, and every password signs in', async (t) => {
  const a = await running(t)
  const ada = await newUser(a.app, { name: 'Ada', email: 'ada@example.com', password: 'ada-password-1' })
  await markVerified(a.app, 'ada@example.com')
  await a.app.inject({ method: 'POST', url: `/users/${ada.id}/emails`, headers: ada.headers, payload: { address: 'ada@second.example' } })
  const file = [
    { external_id: 'old-7', name: 'Bcrypt Bob', email: 'bob@example.com', email_verified: true, password_hash: await bcrypt('bob-password-1', 4), created_at: '2018-01-02T03:04:05Z' },
    { name: 'No Password', email: 'nopass@example.com', status: 'BANNED', role: 'admin' }
  ].map((l) => JSON.stringify(l)).join('\n')
  const started = await a.app.inject({ method: 'POST', url: '/imports', headers: { ...a.admin.headers, 'content-type': 'application/x-ndjson' }, payload: file })
  t.equal(started.statusCode, 202)
  t.match(await waitFor(a.base, a.admin, started.json<{ id: number }>().id), { status: 'succeeded', created: 2 })

  const exported = await fetch(`${a.base}/exports/users?include=password_hash`, { headers: a.admin.headers })
  t.equal(exported.status, 200)
  t.match(exported.headers.get('content-type'), /^application\/x-ndjson/)
  t.equal(exported.headers.get('cache-control'), 'no-store')
  const b = await running(t)
  // The export's stream is the import's body, socket to socket.
  const posted = await fetch(`${b.base}/imports`, {
    method: 'POST', headers: { ...b.admin.headers, 'content-type': 'application/x-ndjson' }, body: exported.body, duplex: 'half'
  })
  t.equal(posted.status, 202)
  const done = await waitFor(b.base, b.admin, (await posted.json() as { id: number }).id)
  t.match(done, { status: 'succeeded', created: 3, skipped: 1, failed: 0 }, 'every user created, the first admin already there')

  const before = await users(a.base, a.admin)
  const after = await users(b.base, b.admin)
  // Each instance made its own first admin.
  const byMail = (list: Line[]) => Object.fromEntries(list.map((u) => [u.emails.find((e) => e.primary)!.address, u]).filter(([email]) => email !== 'root@example.com'))
  t.same(byMail(after), byMail(before), 'names, addresses and their marks, status, role, created_at and external ids the same')
  for (const [email, password] of [['ada@example.com', 'ada-password-1'], ['bob@example.com', 'bob-password-1']]) {
    const res = await fetch(`${b.base}/auth/tokens`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password })
    })
    t.equal(res.status, 201, `${email} signs in on the second instance with the same password`)
  }

  const events = await a.app.inject({ method: 'GET', url: '/events?type=users.exported', headers: a.admin.headers })
  type Exported = { user_id: number | null; actor: { type: string; id: number }; data: { count: number; password_hashes: boolean } }
  const items = events.json<{ items: Exported[] }>().items
  t.same(items.map((e) => [e.user_id, e.actor.id, e.data]), [
    [null, a.admin.id, { count: 4, password_hashes: true }], [null, a.admin.id, { count: 4, password_hashes: false }]
  ], 'each export writes users.exported')
  const plain = await fetch(`${a.base}/exports/users`, { headers: ada.headers })
  t.equal(plain.status, 401, 'admins only')
  const lines = (await (await fetch(`${a.base}/exports/users`, { headers: a.admin.headers })).text()).trim().split('\n').map((l) => JSON.parse(l) as Line)
  t.ok(lines.every((l) => !('password_hash' in l)), 'no hash unless asked for')
})

t.test('an export is one snapshot, read as the client reads it', async (t) => {
  const a = await running(t)
  const file = Array.from({ length: 1200 }, (_, i) => JSON.stringify({ name: `User ${i}`, email: `u${i}@example.com` })).join('\n')
  const started = await a.app.inject({ method: 'POST', url: '/imports', headers: { ...a.admin.headers, 'content-type': 'application/x-ndjson' }, payload: file })
  t.match(await waitFor(a.base, a.admin, started.json<{ id: number }>().id), { created: 1200 })
  const last = await session(a.app, 'u1199@example.com', 'x').catch(() => undefined)
  t.equal(last, undefined, 'imported without a password')

  const res = await fetch(`${a.base}/exports/users`, { headers: a.admin.headers })
  const reader = res.body!.getReader()
  const first = await reader.read()
  t.ok(first.value && first.value.length > 0, 'the first batch came')
  // While the reader waits, the last user is renamed and another one deleted.
  const lastId = (await a.app.inject({ method: 'GET', url: '/users?email=u1199@example.com', headers: a.admin.headers })).json<{ items: Array<{ id: number }> }>().items[0]!.id
  const otherId = lastId - 1
  t.equal((await a.app.inject({ method: 'PUT', url: `/users/${lastId}/name`, headers: a.admin.headers, payload: { name: 'Renamed' } })).statusCode, 200, 'a write goes on during an export')
  t.equal((await a.app.inject({ method: 'DELETE', url: `/users/${otherId}`, headers: a.admin.headers })).statusCode, 204)
  let text = Buffer.from(first.value).toString()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    text += Buffer.from(value).toString()
  }
  const lines = text.trim().split('\n').map((l) => JSON.parse(l) as Line)
  t.equal(lines.length, 1201, 'every user as it was when the export began')
  t.equal(lines.at(-1)?.name, 'User 1199', 'the renamed user as it was')
  t.ok(lines.some((l) => l.emails[0]?.address === 'u1198@example.com'), 'the deleted user as it was')
})

t.test('an export its reader walks away from gives its snapshot back and still writes its event', async (t) => {
  // Two pooled connections: a snapshot kept by each abandoned export would leave none for the requests after them.
  const a = await running(t, { DB_POOL_SIZE: '2' })
  const file = Array.from({ length: 5000 }, (_, i) => JSON.stringify({ email: `w${i}@example.com` })).join('\n')
  const started = await a.app.inject({ method: 'POST', url: '/imports', headers: { ...a.admin.headers, 'content-type': 'application/x-ndjson' }, payload: file })
  t.match(await waitFor(a.base, a.admin, started.json<{ id: number }>().id), { created: 5000 })
  for (let i = 0; i < 4; i++) {
    const aborted = new AbortController()
    const res = await fetch(`${a.base}/exports/users`, { headers: a.admin.headers, signal: aborted.signal })
    const reader = res.body!.getReader()
    await reader.read()
    aborted.abort()
    await reader.cancel().catch(() => {})
  }
  let events: Array<{ data: string }> = []
  for (let i = 0; i < 100 && events.length < 4; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    events = await a.app.db.selectFrom('events').select('data').where('type', '=', 'users.exported').execute()
  }
  t.equal(events.length, 4, 'each cut-short export wrote users.exported')
  t.ok(events.every((e) => (JSON.parse(e.data) as { count: number }).count <= 5001), 'with the count it had written')
  const full = await fetch(`${a.base}/exports/users`, { headers: a.admin.headers })
  t.equal((await full.text()).trim().split('\n').length, 5001, 'a whole export still runs: no snapshot was left holding a connection')
  t.equal((await fetch(`${a.base}/users?limit=1`, { headers: a.admin.headers })).status, 200, 'and so do the requests beside it')
})
