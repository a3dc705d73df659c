import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import t from 'tap'
import type { App } from '../../src/app.js'
import { eraseBatch } from '../../src/accounts/erasure.js'
import { adminUser, assertProblem, bearer, build, ENGINE, login, newUser, session, type BuildOptions, type TestUser } from '../helpers.js'
import { Receiver, until } from '../webhooks/receiver.js'

const LOCAL = { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }
const FAST: BuildOptions = {
  mail: { pollMs: 50 }, events: { pollMs: 50 }, deletions: { everyMs: 50 },
  webhooks: { delivery: { retryBaseMs: 1500, retryMaxMs: 1500, timeoutMs: 2000 } }
}

/** Every page of a listing, joined: the whole text a client could read there. */
async function readAll(app: App, headers: Record<string, string>, first: string): Promise<string> {
  let out = ''
  let url: string | null = first
  while (url) {
    const res: { statusCode: number; body: string } = await app.inject({ url, headers })
    out += res.body
    url = res.statusCode === 200 ? ((JSON.parse(res.body) as { next?: string | null }).next ?? null) : null
  }
  return out
}

/** A user with a full history: two addresses, a rename, sessions from a named client, metadata, a failed sign-in. */
async function fullHistory(app: App, admin: TestUser) {
  const tag = randomBytes(4).toString('hex')
  const strings = {
    name: `Zebedee Quokka ${tag}`, renamed: `Zebedee Renamed ${tag}`, email: `zebedee.${tag}@example.com`,
    second: `quokka.${tag}@example.org`, agent: `QuokkaPhone/${tag}`, secret: `favourite-colour-${tag}`
  }
  const created = await app.inject({
    method: 'POST', url: '/users', headers: { ...admin.headers, 'idempotency-key': `create-${tag}` },
    payload: { name: strings.name, email: strings.email, password: 'password-123' }
  })
  const id = created.json<{ id: number }>().id
  const token = (await session(app, strings.email, 'password-123', { headers: { 'user-agent': strings.agent } })).token
  const user = { id, email: strings.email, password: 'password-123', token, headers: bearer(token) }
  await app.inject({ method: 'PUT', url: `/users/${id}/name`, headers: user.headers, payload: { name: strings.renamed } })
  await app.inject({ method: 'POST', url: `/users/${id}/emails`, headers: user.headers, payload: { address: strings.second } })
  await app.inject({ method: 'PATCH', url: `/users/${id}/metadata`, headers: admin.headers, payload: { private: { note: strings.secret }, public: { colour: strings.secret } } })
  await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: strings.email, password: 'wrong-password' }, headers: { 'user-agent': strings.agent } })
  return { user, strings: Object.values(strings) }
}

const leaks = (text: string, strings: string[]) => strings.filter((s) => text.includes(s))

t.test('a deleted user is forgotten: the feed, the deliveries and every answer hold nothing of it', async (t) => {
  const receiver = await Receiver.start(t)
  // The background erasure held back: what is read and delivered before it runs must show the user erased already.
  const app = await build(t, { ...FAST, deletions: { everyMs: 3_600_000 }, env: LOCAL })
  const admin = await adminUser(app)
  const subscription = { url: receiver.url, events: ['user.*', 'email.*', 'session.*', 'login.*'] }
  const hook = await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: subscription })
  const hookId = hook.json<{ id: number }>().id
  receiver.secrets = [hook.json<{ secret: string }>().secret]
  // The receiver is down while the history is made: its deliveries wait, holding the user's data, until after the deletion.
  receiver.answer = () => ({ status: 503 })
  const db = app.db
  const { user, strings } = await fullHistory(app, admin)
  const other = await newUser(app)
  t.ok(leaks(await readAll(app, admin.headers, '/events?limit=200'), strings).length > 0, 'the history is in the feed before')
  t.ok(leaks(await readAll(app, user.headers, `/users/${user.id}/export`), strings).length > 0, 'and in its export')
  // Each delivery tried once and waiting for its retry: none is on its way while the user is deleted.
  const untried = () => db.selectFrom('outbox').select('id').where('kind', '=', 'webhook').where('attempts', '=', 0).execute()
  await until('every delivery tried once', async () => (await untried()).length === 0)
  await new Promise((resolve) => setTimeout(resolve, 100))

  const res = await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: admin.headers })
  t.equal(res.statusCode, 204)
  const deletedAt = Date.now()
  // At once, before the background erasure has run a batch: the feed shows every one of its events erased.
  const feedNow = await readAll(app, admin.headers, '/events?limit=200')
  t.same(leaks(feedNow, strings), [], 'the feed holds none of its strings at once')
  const activityNow = await readAll(app, admin.headers, `/users/${user.id}/events?limit=200`)
  t.same(leaks(activityNow, strings), [], 'nor does its activity')
  t.ok((await db.selectFrom('events').select('id').where('user_id', '=', user.id).where('erased', '=', 0).execute()).length > 0,
    'while its events are not erased yet')

  receiver.answer = () => ({ status: 204 })
  await until('the deletion delivered', () => receiver.received.some((r) => r.event.type === 'user.deleted' && r.event.user_id === user.id), 10_000)
  await until('the deliveries', async () => (await db.selectFrom('outbox').select('id').where('kind', '=', 'webhook').where('state', '=', 'pending').execute()).length === 0, 10_000)
  const after = receiver.received.filter((r) => r.at >= deletedAt)
  t.ok(after.some((r) => r.event.type === 'user.deleted' && r.event.user_id === user.id), 'the receiver learns that the user was deleted')
  t.same(leaks(after.map((r) => r.body).join('\n'), strings), [], 'no delivery made after the deletion carries its strings')
  // Now the erasure, as the background job makes it.
  while (await eraseBatch(db, user.id) > 0) { /* the next batch */ }
  t.same(await db.selectFrom('erasures').select('user_id').execute(), [], 'the erasure is done')
  const deleted = after.find((r) => r.event.type === 'user.deleted')!
  t.same({ data: deleted.event.data, previous: deleted.event.previous }, { data: {}, previous: null })
  t.ok(after.every((r) => r.verified.every(Boolean)), 'every erased delivery is signed for what it carries')

  const own = (await readAll(app, admin.headers, `/events?user_id=${user.id}&limit=200`))
  const events = JSON.parse(own) as { items: Array<{ type: string; user_id: number; actor: { type: string }; erased?: boolean; data: object }> }
  t.ok(events.items.length >= 6, `its events keep their skeleton (${events.items.length})`)
  t.ok(events.items.every((e) => e.erased === true && e.user_id === user.id && Object.keys(e.data).length === 0), 'each is erased')
  const everywhere = [
    feedNow, activityNow, own, await readAll(app, admin.headers, '/events?limit=200'),
    await readAll(app, admin.headers, '/users?limit=200'), await readAll(app, admin.headers, `/webhooks/${hookId}/deliveries?limit=200`),
    (await app.inject({ url: `/users/${user.id}`, headers: admin.headers })).body,
    (await app.inject({ url: `/users/${user.id}/export`, headers: admin.headers })).body,
    (await app.inject({ url: `/users/${other.id}/export`, headers: other.headers })).body
  ]
  t.same(leaks(everywhere.join('\n'), strings), [], 'no answer holds any of its strings')
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: admin.headers }), 404, 'USER_NOT_FOUND')
  assertProblem(t, await app.inject({ url: `/users/email/${encodeURIComponent(strings[2]!)}`, headers: admin.headers }), 404, 'USER_NOT_FOUND')

  // What no endpoint shows is gone from the database too: the kept idempotent answer, the deliveries, queued mail.
  const stored = JSON.stringify([
    await db.selectFrom('idempotency_keys').selectAll().execute(),
    await db.selectFrom('outbox').select(['recipient', 'data']).execute(),
    await db.selectFrom('events').select(['data', 'previous']).execute()
  ])
  t.same(leaks(stored, strings), [], 'no table holds its strings')
  t.equal((await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: strings[2], password: 'password-123' } })).statusCode, 401)
})

t.test('with a grace, a deletion is scheduled: signed out, hidden, restorable, then final by itself', async (t) => {
  const app = await build(t, { ...FAST, env: { ACCOUNT_DELETION_GRACE_SECONDS: '2' } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  const refresh = (await session(app, user.email, user.password)).refresh_token

  const scheduled = await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: user.headers })
  t.equal(scheduled.statusCode, 202, scheduled.body)
  const at = Date.parse(scheduled.json<{ deletion_scheduled_at: string }>().deletion_scheduled_at)
  t.ok(at > Date.now() && at <= Date.now() + 2000, 'the deletion is due when the grace ends')
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: user.headers }), 401, 'UNAUTHENTICATED')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'refresh_token', refresh_token: refresh } }), 401, 'INVALID_GRANT')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password } }), 401, 'INVALID_CREDENTIALS')
  const seen = await app.inject({ url: `/users/${user.id}`, headers: admin.headers })
  t.equal(seen.json<{ deletion_scheduled_at: string }>().deletion_scheduled_at, new Date(at).toISOString(), 'admins see it scheduled')
  assertProblem(t, await app.inject({ method: 'POST', url: '/users', payload: { name: 'Taker', email: user.email, password: 'password-123' } }), 409, 'EMAIL_TAKEN',
    'its address stays held')
  const again = await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: admin.headers })
  t.equal(again.statusCode, 202)
  t.equal(again.json<{ deletion_scheduled_at: string }>().deletion_scheduled_at, new Date(at).toISOString(), 'a second DELETE changes nothing')

  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${user.id}/restore`, headers: user.headers }), 401, 'UNAUTHENTICATED')
  const restored = await app.inject({ method: 'POST', url: `/users/${user.id}/restore`, headers: admin.headers })
  t.equal(restored.statusCode, 200, restored.body)
  t.equal(restored.json<{ deletion_scheduled_at: null }>().deletion_scheduled_at, null)
  const back = await login(app, user.email, user.password)
  t.ok(back, 'it signs in again')
  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${user.id}/restore`, headers: admin.headers }), 409, 'DELETION_NOT_SCHEDULED')
  const types = (await app.inject({ url: `/events?user_id=${user.id}&type=user.*&limit=200`, headers: admin.headers })).json<{ items: Array<{ type: string }> }>().items.map((e) => e.type)
  t.same(types.filter((type) => type !== 'user.created'), ['user.deletion_scheduled', 'user.restored'])

  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${admin.id}`, headers: admin.headers }), 409, 'LAST_ADMIN', 'the last admin cannot schedule itself away')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: admin.headers })).statusCode, 202)
  await until('the final deletion', async () => (await app.inject({ url: `/users/${user.id}`, headers: admin.headers })).statusCode === 404, 10_000)
  const final = (await app.inject({ url: `/events?user_id=${user.id}&type=user.deleted`, headers: admin.headers })).json<{ items: Array<{ actor: { type: string }; erased: boolean }> }>().items
  t.match(final, [{ actor: { type: 'system' }, erased: true }], 'made final by the service itself, erased')
})

t.test('a restore that comes after the grace has ended finds the deletion made final, not undone', async (t) => {
  // The background job is held off: the request alone must keep the deadline.
  const app = await build(t, { deletions: { everyMs: 3_600_000 }, env: { ACCOUNT_DELETION_GRACE_SECONDS: '1' } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: admin.headers })).statusCode, 202)
  await new Promise((resolve) => setTimeout(resolve, 1100))
  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${user.id}/restore`, headers: admin.headers }), 404, 'USER_NOT_FOUND')
  assertProblem(t, await app.inject({ url: `/users/${user.id}`, headers: admin.headers }), 404, 'USER_NOT_FOUND')
  const final = (await app.inject({ url: `/events?user_id=${user.id}&type=user.deleted`, headers: admin.headers })).json<{ items: Array<{ actor: { type: string } }> }>().items
  t.match(final, [{ actor: { type: 'system' } }], 'final as the job would have made it')
})

t.test('GET /users/{id}/export: everything held about the user, as the caller may read it, streamed', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const stranger = await newUser(app)
  await app.inject({ method: 'PATCH', url: `/users/${user.id}/metadata`, headers: admin.headers, payload: { public: { plan: 'pro' }, private: { risk: 'low' } } })
  // Many events: the document is written a batch of them at a time.
  const rows = Array.from({ length: 1200 }, (_, i) => ({
    public_id: `evt_${String(i).padStart(26, '0')}`, type: 'login.failed' as const, user_id: user.id, actor_type: 'anonymous' as const, actor_id: null,
    request_id: null, data: JSON.stringify({ email: user.email, client: 'x' }), previous: null, occurred_at: Date.now(), position: null
  }))
  for (let i = 0; i < rows.length; i += 300) await app.db.insertInto('events').values(rows.slice(i, i + 300)).execute()

  const own = await app.inject({ url: `/users/${user.id}/export`, headers: user.headers })
  t.equal(own.statusCode, 200)
  t.match(own.headers['content-type'], /^application\/json/)
  const doc = own.json<{
    user: { id: number }; emails: Array<{ address: string; verified: boolean }>; sessions: Array<{ current: boolean }>
    metadata: Record<string, unknown>; events: Array<{ type: string }>
  }>()
  t.equal(doc.user.id, user.id)
  t.match(doc.emails, [{ address: user.email, verified: false }])
  t.match(doc.sessions, [{ current: true }])
  t.same(doc.metadata.public, { plan: 'pro' })
  t.notOk('private' in doc.metadata, 'no private metadata for the user itself')
  t.ok(doc.events.length >= 1203, `every event (${doc.events.length})`)
  t.notOk(own.body.includes('"risk"'), 'not in its events either')
  const byAdmin = (await app.inject({ url: `/users/${user.id}/export`, headers: admin.headers })).json<{ metadata: { private: unknown } }>()
  t.same(byAdmin.metadata.private, { risk: 'low' }, 'an admin sees it all')
  assertProblem(t, await app.inject({ url: `/users/${user.id}/export`, headers: stranger.headers }), 401, 'FORBIDDEN')
  assertProblem(t, await app.inject({ url: '/users/999999/export', headers: admin.headers }), 404, 'USER_NOT_FOUND')
})

t.test('a user with 100,000 events is erased in short batches, other writers going on between them', async (t) => {
  const app = await build(t, { deletions: { everyMs: 3_600_000 } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  const other = await newUser(app)
  await app.db.insertInto('events').values({
    public_id: 'evt_t', type: 'login.failed', user_id: user.id, actor_type: 'anonymous', actor_id: null, request_id: null,
    data: JSON.stringify({ email: user.email, client: 'x'.repeat(100) }), previous: null, occurred_at: Date.now(), position: -1
  }).execute()
  // Doubled 17 times: 131,072 rows, each public id made unique by the letter of its doubling, each feed position by
  // its own negative number (below every real one: the sequencer leaves them be).
  for (let g = 0; g < 17; g++) {
    const letter = String.fromCharCode(97 + g)
    const id = ENGINE === 'mysql' ? sql`concat(public_id, ${letter})` : sql`public_id || ${letter}`
    await sql`insert into events (public_id, type, user_id, actor_type, actor_id, request_id, data, previous, occurred_at, position)
      select ${id}, type, user_id, actor_type, actor_id, request_id, data, previous, occurred_at, position - ${2 ** g}
      from events where user_id = ${user.id} and position < 0`.execute(app.db)
  }
  t.equal((await app.db.selectFrom('events').select('id').where('user_id', '=', user.id).execute()).length >= 100_000, true)
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: admin.headers })).statusCode, 204, 'the deletion itself does not wait on the events')

  let batches = 0
  let longest = 0
  let writes = 0
  let erasing = true
  const writer = (async () => {
    while (erasing) {
      const res = await app.inject({ method: 'PUT', url: `/users/${other.id}/name`, headers: other.headers, payload: { name: `Other ${writes}` } })
      if (res.statusCode !== 200) throw new Error(`a write failed beside the erasure: ${res.statusCode} ${res.body}`)
      writes++
    }
  })()
  for (;;) {
    const started = Date.now()
    const erased = await eraseBatch(app.db, user.id)
    longest = Math.max(longest, Date.now() - started)
    if (erased === 0) break
    batches++
    await new Promise((resolve) => setImmediate(resolve))
  }
  erasing = false
  await writer
  t.ok(batches >= 200, `erased in ${batches} batches`)
  t.ok(longest < 2000, `each batch within the statement deadline (longest ${longest} ms)`)
  t.ok(writes > 0, `other writers went on meanwhile (${writes} writes)`)
  const left = await app.db.selectFrom('events').select('id').where('user_id', '=', user.id).where('erased', '=', 0).execute()
  t.equal(left.length, 0, 'every event erased')
  t.equal((await app.db.selectFrom('erasures').select('user_id').execute()).length, 0, 'and the erasure done')
})
