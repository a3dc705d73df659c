import t from 'tap'
import { recordEvent, systemCause } from '../../src/events/record.js'
import { purgeEvents } from '../../src/events/sequencer.js'
import { adminUser, assertProblem, bearer, build, ENGINE, markVerified, newUser, session, type TestUser } from '../helpers.js'
import type { App } from '../../src/app.js'

interface Ev {
  id: string
  type: string
  occurred_at: string
  user_id: number | null
  actor: { type: string; id: number | null }
  request_id: string | null
  data: Record<string, unknown>
  previous: Record<string, unknown> | null
}
interface Page { href: string; items: Ev[]; next: string | null }

/** Follows the feed from `after` to its end, as a reader does; every page's `next` followed until null. */
async function follow(app: App, admin: TestUser, query = '', after?: string): Promise<Ev[]> {
  const seen: Ev[] = []
  let url: string | null = `/events?limit=3${query}${after ? `&after=${after}` : ''}`
  while (url) {
    const res: { statusCode: number; body: string; json: <T>() => T } = await app.inject({ method: 'GET', url, headers: admin.headers })
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`)
    const page: Page = res.json<Page>()
    seen.push(...page.items)
    url = page.next
  }
  return seen
}

const lastOf = (events: Ev[]) => events[events.length - 1]?.id

t.test('every change writes one event in its transaction, with what it replaced, who made it and the request id', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const start = lastOf(await follow(app, admin))

  const signup = await app.inject({ method: 'POST', url: '/users', headers: { 'x-request-id': 'signup-1' }, payload: { name: 'Ada', email: 'ada@example.com', password: 'password-123' } })
  t.equal(signup.statusCode, 201)
  const ada = signup.json<{ id: number }>().id
  const s = await session(app, 'ada@example.com', 'password-123', { headers: { 'user-agent': 'RosterApp/1.0' } })
  const wrong = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'ada@example.com', password: 'wrong-password' } })
  t.equal(wrong.statusCode, 401)
  const rename = await app.inject({ method: 'PUT', url: `/users/${ada}/name`, headers: { ...bearer(s.token), 'x-request-id': 'rename-1' }, payload: { name: 'Ada L.' } })
  t.equal(rename.statusCode, 200)
  const added = await app.inject({ method: 'POST', url: `/users/${ada}/emails`, headers: bearer(s.token), payload: { address: 'ada@work.example' } })
  t.equal(added.statusCode, 201)
  const second = added.json<{ id: number }>().id
  await markVerified(app, 'ada@work.example')
  const primary = await app.inject({ method: 'PUT', url: `/users/${ada}/emails/${second}`, headers: bearer(s.token), payload: { primary: true } })
  t.equal(primary.statusCode, 200, primary.body)
  const ban = await app.inject({ method: 'PUT', url: `/users/${ada}/status`, headers: admin.headers, payload: { status: 'BANNED' } })
  t.equal(ban.statusCode, 200)

  // The failed login is written after its answer: the feed shows it once it committed.
  let events: Ev[] = []
  for (let i = 0; i < 50; i++) {
    events = (await follow(app, admin, '', start)).filter((e) => e.user_id === ada)
    if (events.some((e) => e.type === 'login.failed')) break
    await new Promise((r) => setTimeout(r, 20))
  }
  const types = events.map((e) => e.type)
  t.same(types.filter((x) => x !== 'login.failed'), [
    'user.created', 'session.created', 'user.updated', 'email.added', 'email.primary_changed',
    'user.status_changed', 'session.ended'
  ])
  t.equal(types.filter((x) => x === 'login.failed').length, 1)
  const byType = (type: string) => events.find((e) => e.type === type)!

  const created = byType('user.created')
  t.same(created.actor, { type: 'anonymous', id: null })
  t.equal(created.request_id, 'signup-1')
  t.equal(created.previous, null)
  t.match(created.data, { id: ada, name: 'Ada', email: 'ada@example.com', status: 'ACTIVE', href: `/users/${ada}` })
  t.match(created.id, /^evt_[0-9A-Z]{26}$/)

  const login = byType('session.created')
  t.same(login.actor, { type: 'user', id: ada })
  t.match(login.data, { id: s.session.id, client: 'RosterApp/1.0', current: false })

  const failed = byType('login.failed')
  t.same(failed.actor, { type: 'anonymous', id: null })
  t.same(failed.data, { email: 'ada@example.com', client: 'lightMyRequest' })

  const renamed = byType('user.updated')
  t.equal(renamed.request_id, 'rename-1')
  t.equal(renamed.request_id, rename.headers['x-request-id'])
  t.same(renamed.actor, { type: 'user', id: ada })
  t.equal(renamed.data.name, 'Ada L.')
  t.equal(renamed.previous?.name, 'Ada')
  t.notOk('email' in (renamed.previous ?? {}), 'previous holds only what changed')

  t.match(byType('email.added').data, { id: second, address: 'ada@work.example', primary: false, verified: false })
  const moved = byType('email.primary_changed')
  t.match(moved.data, { id: second, primary: true })
  t.match(moved.previous, { email_id: Number, address: 'ada@example.com' })
  t.not(moved.previous?.email_id, second)

  const banned = byType('user.status_changed')
  t.same(banned.actor, { type: 'admin', id: admin.id })
  t.same(banned.previous?.status, 'ACTIVE')
  t.equal(banned.data.status, 'BANNED')
  t.match(byType('session.ended').data, { id: s.session.id, reason: 'banned' })

  // No secret reaches an event: no password, no token, no hash.
  const text = JSON.stringify(events)
  for (const secret of ['password-123', 'wrong-password', s.token, s.refresh_token]) t.notOk(text.includes(secret), 'no secret in events')
  t.notMatch(text, /password_hash|token_hash|\$argon2/)

  // A deletion forgets the user: each of its events keeps its skeleton, and the deletion itself tells only who it was.
  const del = await app.inject({ method: 'DELETE', url: `/users/${ada}`, headers: admin.headers })
  t.equal(del.statusCode, 204)
  const after = (await follow(app, admin, '', start)).filter((e) => e.user_id === ada)
  t.same(after.map((e) => e.type), [...types, 'user.deleted'])
  t.same(after.map((e) => e.id), [...events.map((e) => e.id), after[after.length - 1]!.id], 'the same events, in the same places')
  const deleted = after[after.length - 1]!
  t.same(deleted.actor, { type: 'admin', id: admin.id })
  for (const e of after) t.match(e, { erased: true, data: {}, previous: null }, `${e.type} erased`)
  t.notMatch(JSON.stringify(after), /Ada|ada@|RosterApp/)
})

t.test('a change refused or rolled back writes no event; reads write none', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const before = await follow(app, admin)
  const stale = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: { ...user.headers, 'if-match': '"999"' }, payload: { name: 'X' } })
  assertProblem(t, stale, 412, 'PRECONDITION_FAILED')
  const taken = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: admin.email } })
  assertProblem(t, taken, 409, 'EMAIL_TAKEN')
  const last = await app.inject({ method: 'PUT', url: `/users/${admin.id}/role`, headers: admin.headers, payload: { role: 'user' } })
  assertProblem(t, last, 409, 'LAST_ADMIN')
  await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: user.headers })
  await app.inject({ method: 'GET', url: `/users/${user.id}/emails`, headers: user.headers })
  t.same(await follow(app, admin, '', lastOf(before)), [], 'no event after the refused changes and the reads')
})

t.test('the feed: paging to the end, coming back later, filters, and bad input', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const users = [await newUser(app), await newUser(app)]
  const all = await follow(app, admin)
  t.ok(all.length >= 5)
  t.equal(new Set(all.map((e) => e.id)).size, all.length, 'no event twice')
  const first = await app.inject({ method: 'GET', url: '/events?limit=2', headers: admin.headers })
  const page = first.json<Page>()
  t.equal(page.items.length, 2)
  t.equal(page.next, `/events?limit=2&after=${page.items[1]!.id}`)
  t.equal(first.headers.link, `<${page.next}>; rel="next"`)

  const rename = await app.inject({ method: 'PUT', url: `/users/${users[0]!.id}/name`, headers: users[0]!.headers, payload: { name: 'Later' } })
  t.equal(rename.statusCode, 200)
  const later = await follow(app, admin, '', lastOf(all))
  t.same(later.map((e) => e.type), ['user.updated'], 'coming back with the last id seen gives exactly what came after it')

  const usersOnly = await follow(app, admin, '&type=user.*')
  t.ok(usersOnly.length > 0 && usersOnly.every((e) => e.type.startsWith('user.')))
  const two = await follow(app, admin, '&type=session.created&type=user.updated')
  t.same([...new Set(two.map((e) => e.type))].sort(), ['session.created', 'user.updated'])
  const ofOne = await follow(app, admin, `&user_id=${users[1]!.id}`)
  t.ok(ofOne.length > 0 && ofOne.every((e) => e.user_id === users[1]!.id))

  assertProblem(t, await app.inject({ method: 'GET', url: '/events?type=user.renamed', headers: admin.headers }), 400, 'INVALID_FILTER')
  assertProblem(t, await app.inject({ method: 'GET', url: '/events?type=billing.*', headers: admin.headers }), 400, 'VALIDATION_FAILED')
  assertProblem(t, await app.inject({ method: 'GET', url: '/events?after=nope', headers: admin.headers }), 400, 'VALIDATION_FAILED')
  assertProblem(t, await app.inject({ method: 'GET', url: '/events?after=evt_01JD0000000000000000000000', headers: admin.headers }), 400, 'INVALID_CURSOR')
  assertProblem(t, await app.inject({ method: 'GET', url: '/events', headers: users[0]!.headers }), 401, 'FORBIDDEN')
  assertProblem(t, await app.inject({ method: 'GET', url: '/events' }), 401, 'UNAUTHENTICATED')
})

t.test('a user\'s own activity: newest first, self or admin', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app)
  const other = await newUser(app)
  await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: 'Newest' } })
  const res = await app.inject({ method: 'GET', url: `/users/${user.id}/events?limit=2`, headers: user.headers })
  t.equal(res.statusCode, 200)
  const page = res.json<Page>()
  t.same(page.items.map((e) => e.type), ['user.updated', 'session.created'])
  t.ok(page.next)
  const rest = await app.inject({ method: 'GET', url: page.next!, headers: user.headers })
  t.same(rest.json<Page>().items.map((e) => e.type), ['user.created'])
  t.equal(rest.json<Page>().next, null)
  const sessions = await app.inject({ method: 'GET', url: `/users/${user.id}/events?type=session.*`, headers: admin.headers })
  t.same(sessions.json<Page>().items.map((e) => e.type), ['session.created'])
  assertProblem(t, await app.inject({ method: 'GET', url: `/users/${user.id}/events`, headers: other.headers }), 401, 'FORBIDDEN')
  // Another user's event id is no place in this user's activity.
  const theirs = (await app.inject({ method: 'GET', url: `/users/${other.id}/events`, headers: other.headers })).json<Page>().items[0]!.id
  assertProblem(t, await app.inject({ method: 'GET', url: `/users/${user.id}/events?after=${theirs}`, headers: user.headers }), 400, 'INVALID_CURSOR')
  assertProblem(t, await app.inject({ method: 'GET', url: '/users/999999/events', headers: admin.headers }), 404, 'USER_NOT_FOUND')
})

t.test('transactions that commit in the opposite order of their ids: the feed misses none and shows none twice', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const start = lastOf(await follow(app, admin))
  const cause = systemCause('')
  let release!: () => void
  const held = new Promise<void>((resolve) => { release = resolve })
  let wroteFirst!: () => void
  const firstWritten = new Promise<void>((resolve) => { wroteFirst = resolve })
  // The first transaction writes its event (the lower id) and stays open.
  const first = app.db.transaction().execute(async (trx) => {
    await recordEvent(trx, cause, 'user.updated', null, { order: 'first' })
    wroteFirst()
    await held
  })
  await firstWritten
  const second = app.db.transaction().execute((trx) => recordEvent(trx, cause, 'user.updated', null, { order: 'second' }))
  let seen: Ev[]
  if (ENGINE === 'mysql') {
    // The second commits while the first is open: the reader sees it alone, then, coming back, the first.
    await second
    seen = await follow(app, admin, '', start)
    t.same(seen.map((e) => e.data.order), ['second'], 'the open transaction\'s event is not shown, nor skipped past')
    release()
    await first
    const after = await follow(app, admin, '', lastOf(seen))
    t.same(after.map((e) => e.data.order), ['first'], 'the late commit comes after what the reader saw')
    seen = [...seen, ...after]
  } else {
    // SQLite has one writer: the second waits for the first, and they commit in order.
    release()
    await Promise.all([first, second])
    seen = await follow(app, admin, '', start)
    t.same(seen.map((e) => e.data.order), ['first', 'second'])
  }
  t.equal(new Set(seen.map((e) => e.id)).size, 2)
})

t.test('a reader following the feed during concurrent writes sees each event exactly once', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const users = await Promise.all([1, 2, 3, 4].map(() => newUser(app)))
  const start = lastOf(await follow(app, admin))
  const seen: Ev[] = []
  let cursor = start
  let writing = true
  const reader = (async () => {
    while (writing) {
      // inject's GETs on SQLite resolve in microtasks alone: the reader yields, as a socket would make it.
      await new Promise((r) => setImmediate(r))
      const got = await follow(app, admin, '&type=user.updated', cursor)
      seen.push(...got)
      cursor = lastOf(got) ?? cursor
    }
  })()
  const renames = users.flatMap((u) => Array.from({ length: 10 }, (_, i) =>
    app.inject({ method: 'PUT', url: `/users/${u.id}/name`, headers: u.headers, payload: { name: `n${i}` } })))
  const answers = await Promise.all(renames)
  t.ok(answers.every((r) => r.statusCode === 200))
  writing = false
  await reader
  seen.push(...await follow(app, admin, '&type=user.updated', cursor))
  t.equal(seen.length, 40, 'every rename once')
  t.equal(new Set(seen.map((e) => e.id)).size, 40, 'none twice')
})

t.test('events past their retention are purged in batches', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  await Promise.all([1, 2, 3].map(() => newUser(app)))
  const all = await follow(app, admin)
  t.ok(all.length >= 7)
  t.equal(await purgeEvents(app.db, Date.now() + 1000, 2), all.length, 'every placed event older than the cutoff, two at a time')
  t.same(await follow(app, admin), [])

  const purging = await build(t, { env: { EVENT_RETENTION_SECONDS: '1' }, events: { purgeEveryMs: 50, pollMs: 50 } })
  const root = await adminUser(purging)
  await newUser(purging)
  t.ok((await follow(purging, root)).length > 0)
  let left = -1
  for (let i = 0; i < 100 && left !== 0; i++) {
    await new Promise((r) => setTimeout(r, 50))
    left = Number((await purging.db.selectFrom('events').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  }
  t.equal(left, 0, 'the service purges them by itself')
})

t.test('events committed during the start (the first admin\'s creation) are placed by the time the app is ready', async (t) => {
  const app = await build(t)
  // Read at once: the background run, scheduled when the app became ready, has had no turn yet.
  const events = await app.db.selectFrom('events').select(['type', 'position']).execute()
  t.ok(events.some((e) => e.type === 'user.created'), 'the first admin\'s creation is an event')
  t.same(events.filter((e) => e.position === null), [], 'and every event has its place in the feed')
})

t.test('a stream of writes is placed a gap at a time: one sequencing run for what the gap gathered', async (t) => {
  const app = await build(t, { events: { gapMs: 400, pollMs: 60_000 } })
  const runs: Array<{ at: number; events: number }> = []
  app.sequencer.follow(async (_trx, placed) => {
    runs.push({ at: performance.now(), events: placed.length })
    return false
  })
  const write = async (order: string) => {
    await app.db.transaction().execute((trx) => recordEvent(trx, systemCause(''), 'user.updated', null, { order }))
    app.sequencer.wake()
  }
  const placedAll = async () => (await app.db.selectFrom('events').select('id').where('position', 'is', null).execute()).length === 0
  const until = async (check: () => Promise<boolean> | boolean) => {
    for (let i = 0; i < 100 && !(await check()); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  // An idle sequencer places a write's event at once.
  const woken = performance.now()
  await write('alone')
  await until(() => runs.length === 1)
  t.same(runs.map((r) => r.events), [1])
  t.ok(runs[0]!.at - woken < 300, 'placed without waiting for a gap')
  // Writes within the gap after that run wait for it, and are placed together.
  await write('a')
  await write('b')
  await write('c')
  await until(placedAll)
  await until(() => runs.length === 2)
  t.same(runs.map((r) => r.events), [1, 3], 'one run for the three')
  t.ok(runs[1]!.at - runs[0]!.at >= 390, 'the second run waited for the gap')
})
