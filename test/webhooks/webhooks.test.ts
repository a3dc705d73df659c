import { sql } from 'kysely'
import t from 'tap'
import type { App } from '../../src/app.js'
import type { Resolved } from '../../src/webhooks/destination.js'
import { adminUser, assertProblem, build, freePort, migratingDatabase, newUser, sharedDatabase, type BuildOptions, type TestUser } from '../helpers.js'
import { TestSmtp } from '../mail/smtp.js'
import { Receiver, until } from './receiver.js'

/** Names the tests resolve without a DNS server: a public one, and one that turns private after it was checked. */
function resolver() {
  let rebound = false
  const resolve = async (name: string): Promise<Resolved[]> => {
    if (name === 'hooks.example') return [{ address: '93.184.216.34', family: 4 }]
    if (name === 'rebind.example') return [{ address: rebound ? '127.0.0.1' : '93.184.216.34', family: 4 }]
    if (name === 'internal.example') return [{ address: '93.184.216.34', family: 4 }, { address: '10.20.30.40', family: 4 }]
    if (name === 'metadata.example') return [{ address: '::a9fe:a9fe', family: 6 }]
    if (name === 'closed.example') return [{ address: '127.0.0.1', family: 4 }]
    throw Object.assign(new Error('getaddrinfo ENOTFOUND resolver-said-this'), { code: 'ENOTFOUND' })
  }
  return { resolve, rebind: () => { rebound = true } }
}

/** Fast timings, and a receiver on this machine allowed. */
const LOCAL = { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }
const FAST: BuildOptions = {
  mail: { pollMs: 50 }, events: { pollMs: 50 },
  webhooks: { delivery: { retryBaseMs: 200, retryMaxMs: 400, timeoutMs: 2000 } }
}

interface Delivery {
  id: number; event_id: string; event_type: string; status: string; attempts: number; last_status_code: number | null; last_error: string | null
}

async function createWebhook(app: App, admin: TestUser, body: Record<string, unknown>) {
  const res = await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: body })
  if (res.statusCode !== 201) throw new Error(`webhook: ${res.statusCode} ${res.body}`)
  return res.json<{ id: number; secret: string; href: string }>()
}

async function deliveries(app: App, admin: TestUser, id: number, query = ''): Promise<Delivery[]> {
  const res = await app.inject({ url: `/webhooks/${id}/deliveries?limit=200${query}`, headers: admin.headers })
  return res.json<{ items: Delivery[] }>().items
}

/** Every event of the feed, oldest first. */
async function feed(app: App, admin: TestUser): Promise<Array<{ id: string; type: string }>> {
  const out = []
  let url: string | null = '/events?limit=200'
  while (url) {
    const page: { items: Array<{ id: string; type: string }>; next: string | null } = (await app.inject({ url, headers: admin.headers })).json()
    out.push(...page.items)
    url = page.next
  }
  return out
}

t.test('webhooks are managed by admins; bad URLs and unknown event types are refused and change nothing', async (t) => {
  const { resolve } = resolver()
  const app = await build(t, { webhooks: { resolve } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  const created = await app.inject({
    method: 'POST', url: '/webhooks', headers: admin.headers,
    payload: { url: 'https://hooks.example/roster', events: ['user.*', 'email.verified'], description: 'CRM', enabled: false }
  })
  t.equal(created.statusCode, 201, created.body)
  const hook = created.json()
  t.match(hook.secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
  t.equal(created.headers.location, `/webhooks/${hook.id}`)
  t.match(hook, { url: 'https://hooks.example/roster', events: ['user.*', 'email.verified'], enabled: false, description: 'CRM', disabled_reason: null })
  const read = await app.inject({ url: `/webhooks/${hook.id}`, headers: admin.headers })
  t.equal(read.statusCode, 200)
  t.notOk('secret' in read.json(), 'the secret is shown once')
  t.equal((await app.inject({ url: '/webhooks', headers: admin.headers })).json().items.length, 1)

  const refused = async (url: string, why: RegExp) => {
    const res = await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: { url, events: ['user.*'] } })
    assertProblem(t, res, 400, 'INVALID_WEBHOOK_URL', url)
    t.match(res.json().detail, why, `${url}: says why`)
  }
  await refused('http://hooks.example/x', /https/)
  await refused('ftp://hooks.example/x', /https/)
  await refused('https://127.0.0.1/x', /not public/)
  await refused('https://[::1]/x', /not public/)
  await refused('https://169.254.169.254/latest', /not public/)
  await refused('https://10.0.0.8/x', /not public/)
  await refused('https://[::ffff:192.168.1.1]/x', /not public/)
  await refused('https://nowhere.example/x', /does not resolve/)
  await refused('https://user:pw@hooks.example/x', /credentials/)
  await refused('not a url at all', /not a URL/)
  const unknown = await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: { url: 'https://hooks.example/x', events: ['user.renamed'] } })
  assertProblem(t, unknown, 400, 'VALIDATION_FAILED')
  t.equal(unknown.json().errors[0].path, '/events/0')
  assertProblem(t, await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: { url: 'https://hooks.example/x', events: [] } }), 400, 'VALIDATION_FAILED')
  t.equal((await app.inject({ url: '/webhooks', headers: admin.headers })).json().items.length, 1, 'nothing was created by the refused requests')

  const put = await app.inject({ method: 'PUT', url: `/webhooks/${hook.id}`, headers: admin.headers, payload: { url: 'https://10.1.2.3/', events: ['user.*'], enabled: true } })
  assertProblem(t, put, 400, 'INVALID_WEBHOOK_URL')
  const replaced = await app.inject({ method: 'PUT', url: `/webhooks/${hook.id}`, headers: admin.headers, payload: { url: 'https://hooks.example/v2', events: ['session.*'], enabled: false } })
  t.equal(replaced.statusCode, 200)
  t.match(replaced.json(), { url: 'https://hooks.example/v2', events: ['session.*'], description: '' })

  assertProblem(t, await app.inject({ url: '/webhooks', headers: user.headers }), 401, 'FORBIDDEN')
  assertProblem(t, await app.inject({ method: 'POST', url: '/webhooks', headers: user.headers, payload: { url: 'https://hooks.example/x', events: ['user.*'] } }), 401, 'FORBIDDEN')
  assertProblem(t, await app.inject({ url: '/webhooks/999', headers: admin.headers }), 404, 'WEBHOOK_NOT_FOUND')
  assertProblem(t, await app.inject({ url: `/webhooks/${hook.id}/deliveries/999`, headers: admin.headers }), 404, 'DELIVERY_NOT_FOUND')
  t.equal((await app.inject({ method: 'DELETE', url: `/webhooks/${hook.id}`, headers: admin.headers })).statusCode, 204)
  assertProblem(t, await app.inject({ url: `/webhooks/${hook.id}`, headers: admin.headers }), 404, 'WEBHOOK_NOT_FOUND')
})

t.test('a PUT or DELETE of a webhook with a stale If-Match is 412 and changes nothing', async (t) => {
  const { resolve } = resolver()
  const app = await build(t, { webhooks: { resolve } })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: 'https://hooks.example/roster', events: ['user.*'] })
  const read = async () => app.inject({ url: `/webhooks/${hook.id}`, headers: admin.headers })
  const tag = String((await read()).headers.etag)
  t.equal((await app.inject({ url: `/webhooks/${hook.id}`, headers: { ...admin.headers, 'if-none-match': tag } })).statusCode, 304, 'the tag is the one a GET checks')
  const put = (ifMatch: string, description: string) => app.inject({
    method: 'PUT', url: `/webhooks/${hook.id}`, headers: { ...admin.headers, 'if-match': ifMatch },
    payload: { url: 'https://hooks.example/roster', events: ['user.*'], enabled: true, description }
  })
  const changed = await put(tag, 'first')
  t.equal(changed.statusCode, 200, changed.body)
  t.not(changed.headers.etag, tag, 'a change is a new tag')
  t.equal(changed.headers.etag, (await read()).headers.etag, 'the answer carries the tag a GET then gives')
  assertProblem(t, await put(tag, 'second'), 412, 'PRECONDITION_FAILED', 'a stale tag')
  assertProblem(t, await put('"stale"', 'second'), 412, 'PRECONDITION_FAILED', 'a tag never given')
  t.equal((await read()).json().description, 'first', 'the refused PUT changed nothing')
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/webhooks/${hook.id}`, headers: { ...admin.headers, 'if-match': tag } }), 412, 'PRECONDITION_FAILED')
  t.equal((await read()).statusCode, 200, 'the refused DELETE deleted nothing')
  const current = String((await read()).headers.etag)
  t.equal((await app.inject({ method: 'DELETE', url: `/webhooks/${hook.id}`, headers: { ...admin.headers, 'if-match': current } })).statusCode, 204)
  t.equal((await read()).statusCode, 404)
})

t.test('an IPv6 address that embeds IPv4 is judged by the IPv4 it embeds', async (t) => {
  const { resolve } = resolver()
  const app = await build(t, { webhooks: { resolve } })
  const admin = await adminUser(app)
  const create = (url: string) => app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: { url, events: ['user.*'] } })
  const embeddings = [
    '[::127.0.0.1]', '[::169.254.169.254]', '[::10.0.0.1]', '[::]', // IPv4-compatible
    '[::ffff:127.0.0.1]', '[::ffff:a9fe:a9fe]', // mapped
    '[64:ff9b::127.0.0.1]', '[64:ff9b::10.0.0.1]', '[64:ff9b::a9fe:a9fe]', // NAT64, well-known prefix
    '[64:ff9b:1::192.168.0.1]', '[64:ff9b:1:a00:0:100::]', // NAT64, local prefix: IPv4 after 96 bits, after 48
    '[2002:7f00:1::1]', '[2002:a9fe:a9fe::]', '[2002:a00:1:1::1]', // 6to4
    '[2001:0:4136:e378:8000:63bf:f5ff:fffe]', // Teredo: the client (inverted) is 10.0.0.1
    '[2001:0:a00:1:8000:63bf:a247:27dd]' // Teredo: the server is 10.0.0.1
  ]
  for (const host of embeddings) {
    const res = await create(`https://${host}/hook`)
    assertProblem(t, res, 400, 'INVALID_WEBHOOK_URL', host)
    t.match(res.json().detail, /not public/, `${host}: not public`)
  }
  // Public IPv4 behind each embedding: a public destination.
  for (const host of ['[::ffff:93.184.216.34]', '[64:ff9b::93.184.216.34]', '[2002:5db8:d822::1]', '[2001:0:4136:e378:8000:63bf:a247:27dd]']) {
    t.equal((await create(`https://${host}/hook`)).statusCode, 201, `${host}: public`)
  }
  const hook = await createWebhook(app, admin, { url: 'https://hooks.example/x', events: ['user.*'] })
  const put = await app.inject({ method: 'PUT', url: `/webhooks/${hook.id}`, headers: admin.headers, payload: { url: 'https://[::10.0.0.1]/x', events: ['user.*'], enabled: true } })
  assertProblem(t, put, 400, 'INVALID_WEBHOOK_URL', 'and on PUT')
})

t.test('a refusal names neither the address a name resolved to nor the resolver\'s error', async (t) => {
  const { resolve } = resolver()
  const app = await build(t, { webhooks: { resolve } })
  const admin = await adminUser(app)
  const cases: Array<[string, RegExp, RegExp]> = [
    ['https://internal.example/x', /not public/, /10\.20\.30\.40|93\.184/],
    ['https://metadata.example/x', /not public/, /a9fe|169\.254/],
    ['https://nowhere.example/x', /does not resolve/, /ENOTFOUND|resolver-said-this/]
  ]
  const hook = await createWebhook(app, admin, { url: 'https://hooks.example/x', events: ['user.*'] })
  for (const [url, says, never] of cases) {
    const created = await app.inject({ method: 'POST', url: '/webhooks', headers: admin.headers, payload: { url, events: ['user.*'] } })
    const put = await app.inject({ method: 'PUT', url: `/webhooks/${hook.id}`, headers: admin.headers, payload: { url, events: ['user.*'], enabled: true } })
    for (const [how, res] of [['create', created], ['PUT', put]] as const) {
      assertProblem(t, res, 400, 'INVALID_WEBHOOK_URL', `${how} ${url}`)
      t.match(res.json().detail, says, `${how} ${url}: says why`)
      t.notMatch(res.body, never, `${how} ${url}: names nothing behind the name`)
    }
  }
})

t.test('every event is delivered, signed per Standard Webhooks, in feed order, one request in flight per webhook', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: LOCAL })
  const admin = await adminUser(app)
  const earlier = (await feed(app, admin)).length
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.*', 'session.created'] })
  receiver.secrets = [hook.secret]
  receiver.answer = () => ({ status: 200, delayMs: 5 })
  for (let i = 0; i < 5; i++) await newUser(app)
  // Events placed before the webhook existed are not sent to it.
  const wanted = (await feed(app, admin)).slice(earlier).filter((e) => e.type.startsWith('user.') || e.type === 'session.created')
  t.ok(wanted.length >= 10)
  await until('every event delivered', () => receiver.received.length >= wanted.length)
  t.same(receiver.ids(), wanted.map((e) => e.id), 'each event once, in the order of the feed')
  t.ok(receiver.received.every((r) => r.verified[0]), 'every signature verified by standardwebhooks')
  t.ok(receiver.received.every((r) => r.id === r.event.id), 'webhook-id is the event id')
  t.equal(receiver.maxInFlight, 1, 'one request in flight')
  const listed = await deliveries(app, admin, hook.id)
  await until('every delivery marked', async () => (await deliveries(app, admin, hook.id)).every((d) => d.status === 'delivered'))
  t.equal(listed.length, wanted.length)
  t.match((await deliveries(app, admin, hook.id))[0], { status: 'delivered', attempts: 1, last_status_code: 200, last_error: null })
  t.same((await deliveries(app, admin, hook.id, '&status=failed')), [])
})

t.test('placing events wakes the outbox only when a webhook takes one, and then at once', async (t) => {
  const receiver = await Receiver.start(t)
  // The outbox polls once a minute: a delivery that arrives within seconds was woken for.
  const app = await build(t, { mail: { pollMs: 60_000 }, events: { pollMs: 50 }, env: LOCAL })
  const admin = await adminUser(app)
  const user = await newUser(app)
  const placed = async () => {
    const rows = await app.db.selectFrom('events').select('id').where('position', 'is', null).execute()
    return rows.length === 0
  }
  const rename = async (name: string) => {
    const res = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name } })
    t.equal(res.statusCode, 200, res.body)
  }
  await until('the start\'s events placed', placed)
  let wakes = 0
  const wake = app.outbox.wake.bind(app.outbox)
  app.outbox.wake = () => { wakes += 1; wake() }

  await rename('Nobody Listens')
  await until('the rename placed', placed)
  t.equal(wakes, 0, 'an event no webhook takes does not wake the outbox')

  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.updated'] })
  receiver.secrets = [hook.secret]
  // Counted from here: the creation's own wake is behind, and its webhook.created, which the webhook does not
  // take, is placed before the rename's event, so a wake for it would be counted by the time the delivery arrives.
  wakes = 0
  await until('the webhook\'s creation placed', placed)
  await rename('Someone Listens')
  await until('the delivery arrives long before the outbox polls', () => receiver.received.length === 1, 5_000)
  t.equal(wakes, 1, 'the delivery written with the placing woke the outbox, and nothing else did')
  t.equal(receiver.received[0]!.event.type, 'user.updated')
})

t.test('a receiver down for a while gets every event once it is back; duplicates only with the same webhook-id', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: LOCAL })
  const admin = await adminUser(app)
  const earlier = (await feed(app, admin)).length
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created', 'user.updated'] })
  receiver.secrets = [hook.secret]
  receiver.down()
  const users = []
  for (let i = 0; i < 4; i++) users.push(await newUser(app))
  for (const u of users) await app.inject({ method: 'PUT', url: `/users/${u.id}/name`, headers: u.headers, payload: { name: 'Renamed' } })
  await until('failed attempts recorded', async () => {
    const d = await deliveries(app, admin, hook.id)
    return d.length === 8 && d.every((x) => x.attempts >= 1 && x.status === 'pending' && x.last_error !== null)
  })
  t.equal(receiver.received.length, 0)
  receiver.up()
  await until('every event after the outage', () => new Set(receiver.ids()).size === 8, 30_000)
  const wanted = (await feed(app, admin)).slice(earlier).filter((e) => e.type === 'user.created' || e.type === 'user.updated').map((e) => e.id)
  t.same([...new Set(receiver.ids())].sort(), [...wanted].sort(), 'none lost')
  for (const id of new Set(receiver.ids())) {
    const copies = receiver.received.filter((r) => r.id === id)
    t.ok(copies.every((c) => c.body === copies[0]!.body && c.verified[0]), `${id}: every copy the same event, signed`)
  }
})

t.test('a failing delivery waits for its retry without holding back the events after it', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: LOCAL })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created'] })
  receiver.secrets = [hook.secret]
  let refuse = true
  receiver.answer = (r) => ({ status: refuse && r.event.data.name === 'Refused' ? 500 : 200 })
  await newUser(app, { name: 'Refused' })
  await newUser(app, { name: 'After' })
  await until('the later event delivered', () => receiver.received.some((r) => r.event.data.name === 'After'))
  const refusedId = receiver.received.find((r) => r.event.data.name === 'Refused')!.id
  const first = (await deliveries(app, admin, hook.id)).find((d) => d.event_id === refusedId)
  t.match(first, { status: 'pending', last_status_code: 500, last_error: /500/ }, 'the failing one waits, with what the receiver said')
  refuse = false
  await until('the failed one delivered on its retry', async () => (await deliveries(app, admin, hook.id)).every((d) => d.status === 'delivered'))
  t.ok(receiver.received.filter((r) => r.event.data.name === 'Refused').length >= 2)
})

t.test('a slow receiver delays only itself; huge answers and redirects fail an attempt, not the service', async (t) => {
  const slow = await Receiver.start(t)
  const fast = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: LOCAL })
  const admin = await adminUser(app)
  const slowHook = await createWebhook(app, admin, { url: slow.url, events: ['user.created'] })
  const fastHook = await createWebhook(app, admin, { url: fast.url, events: ['user.created'] })
  slow.secrets = [slowHook.secret]
  fast.secrets = [fastHook.secret]
  slow.answer = () => ({ status: 200, delayMs: 5000 })
  const started = Date.now()
  await newUser(app)
  await until('the fast receiver has it', () => fast.received.length === 1)
  t.ok(Date.now() - started < 1500, `the fast receiver was not held up by the slow one (${Date.now() - started} ms)`)
  await until('the slow one timed out and was recorded', async () => (await deliveries(app, admin, slowHook.id))[0]?.last_error?.includes('no answer') === true)

  fast.answer = () => ({ status: 302, location: 'http://127.0.0.1:1/elsewhere' })
  await newUser(app)
  await until('the redirect recorded', async () => (await deliveries(app, admin, fastHook.id))[0]?.last_status_code === 302)
  t.match((await deliveries(app, admin, fastHook.id))[0], { status: 'pending', last_error: /redirects are not followed/ })
  fast.answer = () => ({ status: 200, bodyBytes: 20 * 1024 * 1024 })
  await until('delivered despite a 20 MiB answer', async () => (await deliveries(app, admin, fastHook.id)).every((d) => d.status === 'delivered'))
  t.equal((await app.inject('/health/live')).statusCode, 200, 'the service is fine')
})

t.test('a host that resolves to a private address at send time is not connected to', async (t) => {
  const receiver = await Receiver.start(t)
  const { resolve, rebind } = resolver()
  const app = await build(t, { ...FAST, env: { WEBHOOK_ALLOW_HTTP: 'true' }, webhooks: { ...FAST.webhooks, resolve } })
  const admin = await adminUser(app)
  // Public when the webhook is made; the same name then answers 127.0.0.1, where the receiver listens.
  const hook = await createWebhook(app, admin, { url: `http://rebind.example:${receiver.port}/hook`, events: ['user.created'] })
  rebind()
  await newUser(app)
  await until('the attempt failed at the check', async () => /not public/.test((await deliveries(app, admin, hook.id))[0]?.last_error ?? ''))
  const [record] = await deliveries(app, admin, hook.id)
  t.match(record, { status: 'pending', last_status_code: null })
  t.notMatch(record!.last_error, /127\.0\.0\.1/, 'the record does not name the address the name resolved to')
  t.equal(receiver.received.length, 0, 'nothing reached the address behind the name')
})

t.test('a failed exchange is recorded without the address the name resolved to', async (t) => {
  const { resolve } = resolver()
  const port = await freePort()
  const app = await build(t, { ...FAST, env: LOCAL, webhooks: { ...FAST.webhooks, resolve } })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: `http://closed.example:${port}/hook`, events: ['user.created'] })
  await newUser(app)
  await until('the attempt failed', async () => ((await deliveries(app, admin, hook.id))[0]?.attempts ?? 0) >= 1)
  const [record] = await deliveries(app, admin, hook.id)
  t.match(record!.last_error, /exchange failed/)
  t.notMatch(record!.last_error, /127\.0\.0\.1/, 'the address behind the name is not in the record')
})

t.test('the migration moves each webhook\'s secrets to rows of their own, the former one only while it still signs', async (t) => {
  const { db, migrateTo } = await migratingDatabase(t)
  await migrateTo('0010_expiry_indexes')
  const now = Date.now()
  for (const [previous, until] of [['whsec_former', now + 60_000], ['whsec_over', now - 1], [null, null]] as const) {
    await sql`insert into webhooks (url, events, enabled, description, secret, previous_secret, previous_secret_until, created_at, updated_at)
      values ('https://93.184.216.34/', '["user.*"]', 1, '', ${`whsec_current_${String(previous)}`}, ${previous}, ${until}, ${now}, ${now})`.execute(db)
  }
  await migrateTo('0011_webhook_secrets')
  const rows = await db.selectFrom('webhook_secrets').select(['webhook_id', 'secret', 'expires_at']).orderBy('webhook_id').orderBy('id').execute()
  t.same(rows.map((r) => [r.webhook_id, r.secret, r.expires_at]), [
    [1, 'whsec_former', now + 60_000], [1, 'whsec_current_whsec_former', null],
    [2, 'whsec_current_whsec_over', null],
    [3, 'whsec_current_null', null]
  ])
  await migrateTo('0010_expiry_indexes')
  const back = await sql<{ secret: string; previous_secret: string | null }>`select secret, previous_secret from webhooks order by id`.execute(db)
  t.same(back.rows.map((r) => [r.secret, r.previous_secret]), [
    ['whsec_current_whsec_former', 'whsec_former'], ['whsec_current_whsec_over', null], ['whsec_current_null', null]
  ], 'and back')
})

/** Rotates a webhook's secret: the new secret. */
async function rotate(app: App, admin: TestUser, id: number): Promise<string> {
  const res = await app.inject({ method: 'POST', url: `/webhooks/${id}/secret`, headers: admin.headers })
  if (res.statusCode !== 201) throw new Error(`rotation: ${res.statusCode} ${res.body}`)
  return res.json<{ secret: string }>().secret
}

/** Signs a user up and waits for the delivery of its user.created: the one the receiver got. */
async function nextDelivery(app: App, receiver: Receiver) {
  const before = receiver.received.length
  await newUser(app)
  await until('a delivery', () => receiver.received.length > before)
  return receiver.received[before]!
}

t.test('a rotated secret signs beside the former one during the overlap, and alone after it', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: LOCAL })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created'] })
  const secret = await rotate(app, admin, hook.id)
  t.not(secret, hook.secret)
  receiver.secrets = [hook.secret, secret]
  const first = await nextDelivery(app, receiver)
  t.same(first.verified, [true, true], 'verified with the former secret and with the new one')
  t.equal(first.signature.split(' ').length, 2)
  // Past the overlap only the new secret signs.
  await app.db.updateTable('webhook_secrets').set({ expires_at: Date.now() - 1 }).where('secret', '=', hook.secret).execute()
  t.same((await nextDelivery(app, receiver)).verified, [false, true])
})

t.test('a rotation retried with its Idempotency-Key answers the same secret and rotates once', async (t) => {
  const app = await build(t, { ...FAST, env: LOCAL })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: 'http://127.0.0.1:9/hook', events: ['user.created'] })
  const post = () => app.inject({ method: 'POST', url: `/webhooks/${hook.id}/secret`, headers: { ...admin.headers, 'idempotency-key': 'rotate-once' } })
  const [first, again] = [await post(), await post()]
  t.equal(first.statusCode, 201, first.body)
  t.equal(again.statusCode, 201)
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.equal(again.json().secret, first.json().secret, 'the same secret, not a second one')
  const secrets = await app.db.selectFrom('webhook_secrets').select('id').where('webhook_id', '=', hook.id).execute()
  t.equal(secrets.length, 2, 'the creation\'s secret and one rotation')
})

t.test('parallel rotations: every secret answered signs, and so does the one before them', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: LOCAL })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created'] })
  const answers = await Promise.all([1, 2, 3, 4].map(() => app.inject({ method: 'POST', url: `/webhooks/${hook.id}/secret`, headers: admin.headers })))
  t.same(answers.map((a) => a.statusCode), [201, 201, 201, 201])
  const secrets = answers.map((a) => a.json<{ secret: string }>().secret)
  t.equal(new Set(secrets).size, 4, 'four secrets')
  receiver.secrets = [hook.secret, ...secrets]
  const delivered = await nextDelivery(app, receiver)
  t.same(delivered.verified, [true, true, true, true, true], 'the secret before the rotations and each of the four verify the delivery')
  t.equal(delivered.signature.split(' ').length, 5, 'one signature per live secret')
  const rows = await app.db.selectFrom('webhook_secrets').select(['secret', 'expires_at']).where('webhook_id', '=', hook.id).execute()
  t.equal(rows.filter((r) => r.expires_at === null).length, 1, 'one secret is current')
})

t.test('two quick rotations: the first secret keeps its own overlap beside the second', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: { ...LOCAL, WEBHOOK_SECRET_OVERLAP_SECONDS: '3600' } })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created'] })
  const first = await rotate(app, admin, hook.id)
  const firstAt = Date.now()
  await new Promise((r) => setTimeout(r, 50))
  const second = await rotate(app, admin, hook.id)
  const secondAt = Date.now()
  receiver.secrets = [hook.secret, first, second]
  t.same((await nextDelivery(app, receiver)).verified, [true, true, true], 'the original, the first and the second all sign')
  const expiryOf = async (secret: string) => (await app.db.selectFrom('webhook_secrets').select('expires_at').where('secret', '=', secret).executeTakeFirstOrThrow()).expires_at
  const original = await expiryOf(hook.secret)
  const replaced = await expiryOf(first)
  t.ok(original !== null && original <= firstAt + 3_600_000 && original > firstAt + 3_600_000 - 5_000, 'the original signs for the overlap after the first rotation')
  t.ok(replaced !== null && replaced <= secondAt + 3_600_000 && replaced > original!, 'the first signs for the overlap after the second')
  t.equal(await expiryOf(second), null, 'the second is current')
  // The original's overlap ends on its own: the first still signs.
  await app.db.updateTable('webhook_secrets').set({ expires_at: Date.now() - 1 }).where('secret', '=', hook.secret).execute()
  t.same((await nextDelivery(app, receiver)).verified, [false, true, true])
})

t.test('secrets past their overlap are purged; a deleted webhook takes its secrets with it', async (t) => {
  const app = await build(t, { env: { ...LOCAL, PURGE_INTERVAL_SECONDS: '1' } })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: 'https://93.184.216.34/hook', events: ['user.created'] })
  await rotate(app, admin, hook.id)
  await app.db.updateTable('webhook_secrets').set({ expires_at: Date.now() - 1 }).where('secret', '=', hook.secret).execute()
  const secrets = () => app.db.selectFrom('webhook_secrets').select('secret').where('webhook_id', '=', hook.id).execute()
  await until('the expired secret purged', async () => (await secrets()).length === 1, 5_000)
  assertProblem(t, await app.inject({ method: 'POST', url: '/webhooks/9999/secret', headers: admin.headers }), 404, 'WEBHOOK_NOT_FOUND')
  t.equal((await app.inject({ method: 'DELETE', url: `/webhooks/${hook.id}`, headers: admin.headers })).statusCode, 204)
  t.same(await secrets(), [])
})

t.test('a webhook failing long enough is disabled; re-enabled, it gets what waited; deliveries retried by hand; deleted, it gets nothing', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: { ...LOCAL, WEBHOOK_DISABLE_AFTER_SECONDS: '1' } })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created'] })
  receiver.secrets = [hook.secret]
  receiver.answer = () => ({ status: 503 })
  await newUser(app)
  await until('disabled', async () => (await app.inject({ url: `/webhooks/${hook.id}`, headers: admin.headers })).json().enabled === false, 10_000)
  const disabled = (await app.inject({ url: `/webhooks/${hook.id}`, headers: admin.headers })).json()
  t.match(disabled.disabled_reason, /failed/)
  receiver.answer = () => ({ status: 200 })
  const tried = receiver.received.length
  await newUser(app)
  await new Promise((r) => setTimeout(r, 500))
  t.equal(receiver.received.length, tried, 'nothing is sent to a disabled webhook')
  const again = await app.inject({ method: 'PUT', url: `/webhooks/${hook.id}`, headers: admin.headers, payload: { url: receiver.url, events: ['user.created'], enabled: true } })
  t.match(again.json(), { enabled: true, disabled_reason: null })
  await until('what waited is delivered', async () => (await deliveries(app, admin, hook.id)).every((d) => d.status === 'delivered'))

  const one = (await deliveries(app, admin, hook.id))[0]!
  const count = receiver.received.filter((r) => r.id === one.event_id).length
  const retry = () => app.inject({ method: 'POST', url: `/webhooks/${hook.id}/deliveries/${one.id}/retry`, headers: { ...admin.headers, 'idempotency-key': 'retry-once' } })
  const retried = await retry()
  t.equal(retried.statusCode, 202)
  await until('sent again', () => receiver.received.filter((r) => r.id === one.event_id).length === count + 1)
  const replayed = await retry()
  t.equal(replayed.statusCode, 202)
  t.equal(replayed.headers['idempotent-replayed'], 'true', 'a retry of the retry, with its key, is answered again')
  await new Promise((r) => setTimeout(r, 300))
  t.equal(receiver.received.filter((r) => r.id === one.event_id).length, count + 1, 'and sends nothing more')

  t.equal((await app.inject({ method: 'DELETE', url: `/webhooks/${hook.id}`, headers: admin.headers })).statusCode, 204)
  const before = receiver.received.length
  await newUser(app)
  await new Promise((r) => setTimeout(r, 500))
  t.equal(receiver.received.length, before, 'nothing is sent to a deleted webhook')
})

t.test('a delivery failing past WEBHOOK_MAX_AGE_SECONDS is failed', async (t) => {
  const receiver = await Receiver.start(t)
  const app = await build(t, { ...FAST, env: LOCAL, webhooks: { delivery: { retryBaseMs: 100, retryMaxMs: 200, maxAgeMs: 600 } } })
  const admin = await adminUser(app)
  const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created'] })
  receiver.answer = () => ({ status: 500 })
  await newUser(app)
  await until('given up', async () => (await deliveries(app, admin, hook.id))[0]?.status === 'failed')
  t.match((await deliveries(app, admin, hook.id, '&status=failed'))[0], { status: 'failed', last_status_code: 500 })
})

t.test('webhooks stuck on hung receivers do not hold back mail', async (t) => {
  const smtp = await TestSmtp.start(t)
  const hung = await Receiver.start(t)
  hung.answer = () => ({ status: 200, delayMs: 4000 })
  const app = await build(t, { ...FAST, env: { ...LOCAL, SMTP_URL: smtp.url }, webhooks: { delivery: { timeoutMs: 5000 } } })
  const admin = await adminUser(app)
  // More hung webhooks than the outbox has lanes for one kind: every webhook lane is taken.
  for (let i = 0; i < 10; i++) await createWebhook(app, admin, { url: `${hung.url}/${i}`, events: ['user.*'] })
  await newUser(app)
  await until('the webhook lanes taken', () => hung.received.length >= 8)
  const started = Date.now()
  const user = await newUser(app)
  await smtp.waitFor(user.email)
  t.ok(Date.now() - started < 2000, `the verification mail went while every webhook lane waited (${Date.now() - started} ms)`)
})

t.test('two instances on one database: each delivery is sent by one of them, one request in flight, every event once', async (t) => {
  const receiver = await Receiver.start(t)
  const url = await sharedDatabase(t)
  const a = await build(t, { ...FAST, url, env: LOCAL })
  const b = await build(t, { ...FAST, url, env: LOCAL })
  const admin = await adminUser(a)
  const earlier = (await feed(a, admin)).length
  const hook = await createWebhook(a, admin, { url: receiver.url, events: ['user.created'] })
  receiver.secrets = [hook.secret]
  receiver.answer = () => ({ status: 200, delayMs: 10 })
  for (let i = 0; i < 12; i++) await newUser(i % 2 ? a : b)
  const wanted = (await feed(b, admin)).slice(earlier).filter((e) => e.type === 'user.created').map((e) => e.id)
  t.equal(wanted.length, 12)
  await until('every event delivered', () => new Set(receiver.ids()).size === 12)
  await new Promise((r) => setTimeout(r, 300))
  t.same(receiver.ids(), wanted, 'each once, in the order of the feed, though both instances deliver')
  t.equal(receiver.maxInFlight, 1, 'never two requests at once to the webhook')
  t.ok(receiver.received.every((r) => r.verified[0]))
})

t.test('a webhook deleted or disabled while its deliveries are in flight and waiting gets nothing more', async (t) => {
  for (const how of ['delete', 'disable'] as const) {
    const receiver = await Receiver.start(t)
    const app = await build(t, { ...FAST, env: LOCAL })
    const admin = await adminUser(app)
    const hook = await createWebhook(app, admin, { url: receiver.url, events: ['user.created', 'session.created'] })
    receiver.answer = () => ({ status: 503, delayMs: 150 })
    for (let i = 0; i < 3; i++) await newUser(app)
    await until('a lane under way', () => receiver.received.length >= 2)
    const res = how === 'delete'
      ? await app.inject({ method: 'DELETE', url: `/webhooks/${hook.id}`, headers: admin.headers })
      : await app.inject({ method: 'PUT', url: `/webhooks/${hook.id}`, headers: admin.headers, payload: { url: receiver.url, events: ['user.*'], enabled: false } })
    t.ok(res.statusCode === 204 || res.statusCode === 200)
    await new Promise((r) => setTimeout(r, 300)) // the request in flight, if any, answers
    const seen = receiver.received.length
    await new Promise((r) => setTimeout(r, 1500)) // past every retry delay (at most 480 ms here)
    t.equal(receiver.received.length, seen, `${how}: no request after it, though deliveries were waiting`)
  }
})
