import { createHash } from 'node:crypto'
import { sql } from 'kysely'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, bearer, build, login, migratingDatabase, newUser } from '../helpers.js'

const USER = 'urn:ietf:params:scim:schemas:core:2.0:User'
const PATCH = 'urn:ietf:params:scim:api:messages:2.0:PatchOp'
const ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error'
const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse'

/** A SCIM token made by the admin, and the headers an identity provider sends with it. */
async function scimToken(app: App, description = 'Directory') {
  const admin = await adminUser(app)
  const res = await app.inject({ method: 'POST', url: '/scim-tokens', headers: admin.headers, payload: { description } })
  const body = res.json()
  return { admin, id: body.id as number, token: body.token as string, headers: { ...bearer(body.token), 'content-type': 'application/scim+json' }, res }
}

type Scim = { headers: Record<string, string> }
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
const scim = (app: App, who: Scim, method: Method, url: string, body?: unknown, extra: Record<string, string> = {}) => app.inject({
  method, url: `/scim/v2${url}`, headers: { 'content-type': 'application/scim+json', ...who.headers, ...extra },
  ...(body === undefined ? {} : { payload: JSON.stringify(body) })
})

const byUserName = (name: string) => `/Users?filter=${encodeURIComponent(`userName eq "${name}"`)}`

/** The events written about a user, oldest first, as `type actor.type`. */
async function eventsOf(app: App, userId: number) {
  const rows = await app.db.selectFrom('events').select(['type', 'actor_type', 'actor_id', 'data', 'previous'])
    .where('user_id', '=', userId).orderBy('id').execute()
  return rows.map((r) => ({
    type: r.type, actor: { type: r.actor_type, id: r.actor_id }, data: JSON.parse(r.data), previous: r.previous === null ? null : JSON.parse(r.previous)
  }))
}

type Answer = { statusCode: number; headers: Record<string, unknown>; body: string; json: () => any }
function assertScimError(t: Test, res: Answer, status: number, scimType?: string) {
  t.equal(res.statusCode, status, `status ${status} (${res.body.slice(0, 200)})`)
  t.match(String(res.headers['content-type']), /^application\/scim\+json/)
  const body = res.json()
  t.same(body.schemas, [ERROR])
  t.equal(body.status, String(status))
  if (scimType) t.equal(body.scimType, scimType)
  t.type(body.detail, 'string')
}

t.test('SCIM tokens: shown once, a hash kept, /scim/v2 only, revoked at once', async (t) => {
  const app = await build(t)
  const { admin, id, token, headers, res } = await scimToken(app, 'Okta, production')
  t.equal(res.statusCode, 201)
  t.match(res.json(), { id, href: `/scim-tokens/${id}`, description: 'Okta, production', last_used_at: null })
  t.match(token, /^[A-Za-z0-9_-]{43}$/)
  const stored = await app.db.selectFrom('scim_tokens').select('token_hash').where('id', '=', id).executeTakeFirstOrThrow()
  t.equal(stored.token_hash, createHash('sha256').update(token).digest('hex'), 'only its SHA-256 is stored')

  const list = await app.inject({ url: '/scim-tokens', headers: admin.headers })
  t.equal(list.statusCode, 200)
  t.equal(list.json().items.length, 1)
  t.notOk('token' in list.json().items[0], 'never listed with its secret')

  t.equal((await scim(app, { headers }, 'GET', '/ServiceProviderConfig')).statusCode, 200, 'opens /scim/v2')
  const used = await app.inject({ url: '/scim-tokens', headers: admin.headers })
  t.type(used.json().items[0].last_used_at, 'string', 'its last use is recorded')
  for (const url of ['/users', `/users/${admin.id}`, '/events', '/scim-tokens']) {
    assertProblem(t, await app.inject({ url, headers }), 401, 'UNAUTHENTICATED', `a SCIM token does not open ${url}`)
  }
  const user = await newUser(app)
  assertScimError(t, await scim(app, user, 'GET', '/Users'), 401)
  assertScimError(t, await scim(app, { headers: {} }, 'GET', '/Users'), 401)
  t.equal((await scim(app, admin, 'GET', '/Users')).statusCode, 200, 'an admin\'s access token opens /scim/v2 too')

  assertProblem(t, await app.inject({ method: 'POST', url: '/scim-tokens', headers: user.headers, payload: { description: 'x' } }), 401, 'FORBIDDEN', 'admins only')
  t.equal((await app.inject({ method: 'DELETE', url: `/scim-tokens/${id}`, headers: admin.headers })).statusCode, 204)
  assertScimError(t, await scim(app, { headers }, 'GET', '/Users'), 401)
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/scim-tokens/${id}`, headers: admin.headers }), 404, 'SCIM_TOKEN_NOT_FOUND')
})

t.test('discovery, content types, Groups', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const config = await scim(app, idp, 'GET', '/ServiceProviderConfig')
  t.match(String(config.headers['content-type']), /^application\/scim\+json/)
  t.match(config.json(), {
    patch: { supported: true }, filter: { supported: true, maxResults: 200 }, etag: { supported: true },
    bulk: { supported: false }, sort: { supported: false }, changePassword: { supported: false }
  })
  t.match((await scim(app, idp, 'GET', '/ResourceTypes')).json(), { schemas: [LIST], totalResults: 1, Resources: [{ id: 'User', endpoint: '/Users', schema: USER }] })
  t.match((await scim(app, idp, 'GET', '/Schemas')).json(), { totalResults: 1, Resources: [{ id: USER }] })
  assertScimError(t, await scim(app, idp, 'GET', '/Groups'), 404)
  assertScimError(t, await scim(app, idp, 'GET', '/Groups/1'), 404)
  assertScimError(t, await scim(app, idp, 'POST', '/Groups', { displayName: 'Eng' }), 404)
  // A path that cannot be decoded never reaches a route: its answer is SCIM's all the same.
  assertScimError(t, await scim(app, idp, 'GET', '/Users/%FF'), 400)

  const json = await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'plain@example.com' }, { 'content-type': 'application/json' })
  t.equal(json.statusCode, 201, 'application/json is accepted')
  assertScimError(t, await scim(app, idp, 'POST', '/Users', undefined, { 'content-type': 'application/scim+json' }), 400)
  const broken = await app.inject({ method: 'POST', url: '/scim/v2/Users', headers: idp.headers, payload: '{"userName":' })
  assertScimError(t, broken, 400, 'invalidSyntax')
})

t.test('Okta\'s sequence: look up, create, read, replace, deactivate, reactivate', async (t) => {
  const app = await build(t)
  const okta = await scimToken(app, 'Okta')
  const actor = { type: 'scim', id: okta.id }

  // Okta's connection test, then its check that the user does not exist yet.
  const probe = await scim(app, okta, 'GET', '/Users?startIndex=1&count=2')
  t.match(probe.json(), { schemas: [LIST], startIndex: 1 })
  const none = await scim(app, okta, 'GET', `${byUserName('grace.hopper@navy.example')}&startIndex=1&count=100`)
  t.equal(none.statusCode, 200)
  t.same(none.json(), { schemas: [LIST], totalResults: 0, startIndex: 1, itemsPerPage: 0, Resources: [] })

  const created = await scim(app, okta, 'POST', '/Users', {
    schemas: [USER], userName: 'grace.hopper@navy.example', name: { givenName: 'Grace', familyName: 'Hopper' },
    emails: [{ primary: true, value: 'grace.hopper@navy.example', type: 'work' }], displayName: 'Grace Hopper',
    locale: 'en-US', externalId: '00u1okta7Gh', groups: [], password: 'cobol-forever-59', active: true
  })
  t.equal(created.statusCode, 201, created.body)
  const user = created.json()
  const id = Number(user.id)
  t.match(user, {
    schemas: [USER], id: String(id), externalId: '00u1okta7Gh', userName: 'grace.hopper@navy.example',
    name: { formatted: 'Grace Hopper', givenName: 'Grace', familyName: 'Hopper' }, displayName: 'Grace Hopper',
    emails: [{ value: 'grace.hopper@navy.example', type: 'work', primary: true }], active: true,
    meta: { resourceType: 'User', location: `/scim/v2/Users/${id}` }
  })
  t.notOk('password' in user, 'the password is never returned')
  t.equal(created.headers.location, `/scim/v2/Users/${id}`)
  const address = await app.db.selectFrom('emails').select(['id', 'verified_at']).where('user_id', '=', id).executeTakeFirstOrThrow()
  t.equal(created.headers.etag, `W/"v1.${address.id}p"`, 'the version: the user\'s, and its addresses with the primary marked')
  t.equal(user.meta.version, created.headers.etag)
  t.ok(address.verified_at, 'an address from the directory is verified')
  const session = await login(app, 'grace.hopper@navy.example', 'cobol-forever-59')
  t.ok(session, 'the password given signs in')

  // A retry of the same creation makes no second user.
  assertScimError(t, await scim(app, okta, 'POST', '/Users', { schemas: [USER], userName: 'Grace.Hopper@navy.example', active: true }), 409, 'uniqueness')
  assertScimError(t, await scim(app, okta, 'POST', '/Users', { schemas: [USER], userName: 'other@navy.example', externalId: '00u1okta7Gh' }), 409, 'uniqueness')
  t.equal((await scim(app, okta, 'GET', byUserName('GRACE.HOPPER@navy.example'))).json().totalResults, 1, 'userName compares case-insensitively')

  const read = await scim(app, okta, 'GET', `/Users/${id}`)
  t.equal(read.statusCode, 200)
  t.same(read.json(), user)

  const replaced = await scim(app, okta, 'PUT', `/Users/${id}`, {
    schemas: [USER], id: String(id), userName: 'grace.hopper@navy.example', name: { givenName: 'Grace', familyName: 'Brewster Hopper' },
    emails: [{ primary: true, value: 'grace.hopper@navy.example', type: 'work' }], active: true, externalId: '00u1okta7Gh'
  })
  t.equal(replaced.statusCode, 200, replaced.body)
  t.match(replaced.json(), { name: { formatted: 'Grace Brewster Hopper' }, displayName: 'Grace Brewster Hopper', active: true })

  const deactivated = await scim(app, okta, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', value: { active: false } }] })
  t.equal(deactivated.statusCode, 200, deactivated.body)
  t.equal(deactivated.json().active, false)
  const banned = await app.db.selectFrom('users').select(['status', 'ban_reason', 'banned_by_type', 'banned_by_id', 'banned_at']).where('id', '=', id).executeTakeFirstOrThrow()
  t.match(banned, { status: 'BANNED', ban_reason: 'deprovisioned', banned_by_type: 'scim', banned_by_id: okta.id })
  t.ok(banned.banned_at)
  assertProblem(t, await app.inject({ url: `/users/${id}`, headers: bearer(session) }), 401, 'UNAUTHENTICATED', 'the user\'s sessions ended at once')
  t.equal(await app.db.selectFrom('sessions').select('id').where('user_id', '=', id).executeTakeFirst(), undefined, 'no session is left')
  t.equal((await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'grace.hopper@navy.example', password: 'cobol-forever-59' } })).statusCode, 401, 'nor can it sign in')

  const reactivated = await scim(app, okta, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', value: { active: true } }] })
  t.equal(reactivated.json().active, true)
  const lifted = await app.db.selectFrom('users').select(['status', 'ban_reason']).where('id', '=', id).executeTakeFirstOrThrow()
  t.same(lifted, { status: 'ACTIVE', ban_reason: null })
  t.ok(await login(app, 'grace.hopper@navy.example', 'cobol-forever-59'), 'it signs in again')

  const events = (await eventsOf(app, id)).filter((e) => e.type !== 'session.created')
  t.same(events.map((e) => e.type), ['user.created', 'user.updated', 'user.status_changed', 'session.ended', 'user.status_changed'])
  for (const e of events) t.same(e.actor, actor, `${e.type}: the scim actor`)
  t.same(events[1]!.previous.name, 'Grace Hopper', 'user.updated keeps the name it replaced')
  t.match(events[2]!.data, { status: 'BANNED' })
  t.equal(events[3]!.data.reason, 'banned')
})

t.test('Entra ID\'s sequence: filter, create, Replace with strings and filters, nulls, delete', async (t) => {
  const app = await build(t)
  const entra = await scimToken(app, 'Entra ID')

  const none = await scim(app, entra, 'GET', byUserName('alan@contoso.example'))
  t.equal(none.json().totalResults, 0)
  const created = await scim(app, entra, 'POST', '/Users', {
    schemas: [USER, 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User'], externalId: 'alan', userName: 'alan@contoso.example', active: true,
    emails: [{ primary: true, type: 'work', value: 'alan@contoso.example' }], meta: { resourceType: 'User' },
    name: { formatted: 'Alan Turing', familyName: 'Turing', givenName: 'Alan' }, roles: [],
    'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { department: 'Bletchley' }
  })
  t.equal(created.statusCode, 201, created.body)
  const id = Number(created.json().id)
  t.equal((await scim(app, entra, 'GET', `/Users?filter=${encodeURIComponent('externalId eq "alan"')}`)).json().Resources[0].id, String(id))

  const session = await login(app, 'alan@contoso.example', 'unused').catch(() => undefined)
  t.notOk(session, 'a user made without a password has none')

  const renamed = await scim(app, entra, 'PATCH', `/Users/${id}`, {
    schemas: [PATCH], Operations: [
      { op: 'Replace', path: 'name.givenName', value: 'Alan M.' },
      { op: 'Replace', path: 'emails[type eq "work"].value', value: 'turing@contoso.example' },
      { op: 'Add', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department', value: 'NPL' },
      { op: 'Replace', path: 'name.familyName', value: null }
    ]
  })
  t.equal(renamed.statusCode, 200, renamed.body)
  t.match(renamed.json(), {
    userName: 'turing@contoso.example', emails: [{ value: 'turing@contoso.example', primary: true, type: 'work' }], name: { formatted: 'Alan M.' }
  })
  t.equal(renamed.json().emails.length, 1, 'the former primary went with the replacement')

  // Entra's activity change: a capitalised op, a string for the boolean.
  const disabled = await scim(app, entra, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'Replace', path: 'active', value: 'False' }] })
  t.equal(disabled.json().active, false)
  const enabled = await scim(app, entra, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'Replace', path: 'active', value: 'True' }] })
  t.equal(enabled.json().active, true)

  const events = (await eventsOf(app, id)).filter((e) => e.type !== 'login.failed')
  t.same(events.map((e) => e.type), [
    'user.created', 'user.updated', 'email.added', 'email.primary_changed', 'email.removed', 'user.status_changed', 'user.status_changed'
  ])
  const former = events.find((e) => e.type === 'email.removed')!.data
  t.same(events.find((e) => e.type === 'email.primary_changed')!.previous, { email_id: former.id, address: 'alan@contoso.example' }, 'the former primary')
  t.match(events.find((e) => e.type === 'email.added')!.data, { address: 'turing@contoso.example', verified: true })
  for (const e of events) t.same(e.actor, { type: 'scim', id: entra.id }, `${e.type}: the scim actor`)

  const deleted = await scim(app, entra, 'DELETE', `/Users/${id}`)
  t.equal(deleted.statusCode, 204)
  assertScimError(t, await scim(app, entra, 'GET', `/Users/${id}`), 404)
  t.equal((await eventsOf(app, id)).pop()!.type, 'user.deleted')
  assertScimError(t, await scim(app, entra, 'DELETE', `/Users/${id}`), 404)
})

t.test('PATCH: addresses added, a secondary removed, the primary replaced through emails', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const id = Number((await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'ada@example.com', displayName: 'Ada' })).json().id)

  const added = await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'add', path: 'emails', value: [{ value: 'ada@home.example', type: 'home' }] }] })
  t.same(added.json().emails.map((e: any) => [e.value, e.primary]), [['ada@example.com', true], ['ada@home.example', false]])
  const removed = await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'remove', path: 'emails[value eq "ada@home.example"]' }] })
  t.same(removed.json().emails.map((e: any) => e.value), ['ada@example.com'])

  const swapped = await scim(app, idp, 'PATCH', `/Users/${id}`, {
    schemas: [PATCH], Operations: [{ op: 'replace', path: 'emails', value: [{ value: 'ada@example.com', primary: false }, { value: 'countess@example.com', primary: true }] }]
  })
  t.match(swapped.json(), { userName: 'countess@example.com' })
  t.same(swapped.json().emails.map((e: any) => [e.value, e.primary]), [['ada@example.com', false], ['countess@example.com', true]])
  const user = await app.inject({ url: `/users/${id}`, headers: (await adminUser(app)).headers })
  t.equal(user.json().email, 'countess@example.com', 'the API sees the new primary')

  const names = await scim(app, idp, 'PATCH', `/Users/${id}`, {
    schemas: [PATCH], Operations: [{ op: 'replace', value: { displayName: 'Ada King', externalId: 'ada-1' } }, { op: 'replace', path: 'userName', value: 'ada@example.com' }]
  })
  t.match(names.json(), { displayName: 'Ada King', externalId: 'ada-1', userName: 'ada@example.com' })
  const updated = (await eventsOf(app, id)).filter((e) => e.type === 'user.updated').at(-1)!
  t.match(updated, { actor: { type: 'scim' }, data: { name: 'Ada King', external_id: 'ada-1' }, previous: { name: 'Ada', external_id: null } },
    'a new name and externalId: one user.updated, with what they replaced')
  t.equal((await app.inject({ url: `/users/${id}`, headers: idp.admin.headers })).json().external_id, 'ada-1', 'the API\'s User shows it')
  await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'remove', path: 'externalId' }] })
  t.match((await eventsOf(app, id)).at(-1), { type: 'user.updated', data: { external_id: null }, previous: { external_id: 'ada-1' } }, 'and its removal')

  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'userName', value: 'not an address' }] }), 400, 'invalidValue')
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'move', path: 'userName', value: 'a@b.example' }] }), 400, 'invalidSyntax')
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'remove', path: 'emails[value eq "nobody@example.com"]' }] }), 400, 'noTarget')
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'id', value: '7' }] }), 400, 'mutability')
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'active', value: 'maybe' }] }), 400, 'invalidValue')
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [] }), 400, 'invalidSyntax')
  const badEscape = { schemas: [PATCH], Operations: [{ op: 'replace', path: 'emails[value eq "\\x"].value', value: 'x@example.com' }] }
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, badEscape), 400, 'invalidFilter')
})

t.test('errors, filters, paging, attributes', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const other = await newUser(app, { email: 'taken@example.com' })
  assertScimError(t, await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'taken@example.com' }), 409, 'uniqueness')
  assertScimError(t, await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'nobody' }), 400, 'invalidValue')
  assertScimError(t, await scim(app, idp, 'GET', '/Users?filter=' + encodeURIComponent('userName eq')), 400, 'invalidFilter')
  assertScimError(t, await scim(app, idp, 'GET', '/Users?filter=' + encodeURIComponent('title eq "x"')), 400, 'invalidFilter')
  assertScimError(t, await scim(app, idp, 'GET', '/Users?filter='), 400, 'invalidFilter')
  assertScimError(t, await scim(app, idp, 'GET', '/Users?filter=' + encodeURIComponent('userName pr not (userName pr)')), 400, 'invalidFilter')
  assertScimError(t, await scim(app, idp, 'GET', '/Users?filter=' + encodeURIComponent('not userName eq "x"')), 400, 'invalidFilter')
  assertScimError(t, await scim(app, idp, 'GET', '/Users/999999'), 404)
  assertScimError(t, await scim(app, idp, 'GET', '/Users/abc'), 404)
  const id = Number((await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'mine@example.com' })).json().id)
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'add', path: 'emails', value: [{ value: 'taken@example.com' }] }] }), 409, 'uniqueness')
  t.equal((await app.inject({ url: `/users/${other.id}`, headers: other.headers })).json().email, 'taken@example.com', 'the holder keeps it')

  for (let i = 0; i < 4; i++) await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: `page${i}@example.com`, active: i % 2 === 0 })
  const page = await scim(app, idp, 'GET', '/Users?filter=' + encodeURIComponent('userName sw "page"') + '&startIndex=2&count=2')
  t.match(page.json(), { totalResults: 4, startIndex: 2, itemsPerPage: 2 })
  t.same(page.json().Resources.map((r: any) => r.userName), ['page1@example.com', 'page2@example.com'])
  const pageOf = async (query: string) => (await scim(app, idp, 'GET', '/Users?filter=' + encodeURIComponent('userName sw "page"') + query)).json()
  t.match(await pageOf('&startIndex=3&count=5'), { totalResults: 4, startIndex: 3, itemsPerPage: 2 }, 'a page that ends short tells the total')
  t.match(await pageOf('&startIndex=5&count=2'), { totalResults: 4, startIndex: 5, itemsPerPage: 0, Resources: [] }, 'so does one past the end')
  t.match(await pageOf('&count=0'), { totalResults: 4, itemsPerPage: 0 }, 'and a count of none')
  for (const far of ['9007199254740993', '9223372036854775808', '100000000000000000000']) {
    t.match(await pageOf(`&startIndex=${far}`), { totalResults: 4, itemsPerPage: 0, Resources: [] }, `startIndex ${far}: past the end, an empty page`)
  }
  const names = async (filter: string) => (await scim(app, idp, 'GET', `/Users?filter=${encodeURIComponent(filter)}`)).json().Resources.map((r: any) => r.userName).sort()
  await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'one@names.example', displayName: 'Plato' })
  await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'two@names.example', displayName: 'Ada Lovelace' })
  t.same(await names('userName ew "names.example" and name.familyName pr'), ['two@names.example'], 'a name of one word has no family name')
  t.same(await names('userName ew "names.example" and name.familyName eq "plato"'), [])
  t.same(await names('userName ew "names.example" and name.givenName eq "plato"'), ['one@names.example'])
  t.same(await names('userName ew "names.example" and not (externalId eq "x")'), ['one@names.example', 'two@names.example'], 'not (eq) holds of a user without the attribute')
  const inactive = await scim(app, idp, 'GET', '/Users?filter=' + encodeURIComponent('active eq false and emails[type eq "work" and value co "page"]'))
  t.same(inactive.json().Resources.map((r: any) => r.userName), ['page1@example.com', 'page3@example.com'])
  const narrow = await scim(app, idp, 'GET', `/Users?filter=${encodeURIComponent('userName eq "page0@example.com"')}&attributes=userName,name.givenName`)
  t.same(narrow.json().Resources[0], { schemas: [USER], id: narrow.json().Resources[0].id, userName: 'page0@example.com', name: { givenName: 'page0@example.com' } })
  const without = await scim(app, idp, 'GET', `/Users/${id}?excludedAttributes=emails,meta`)
  t.notOk('emails' in without.json())
  t.notOk('meta' in without.json())
  t.equal(without.json().id, String(id))
  t.equal((await scim(app, idp, 'GET', '/Users?count=500')).json().itemsPerPage <= 200, true, 'count is capped at 200')
})

t.test('ETags: meta.version, If-Match, 412 on a stale one', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const created = await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'etag@example.com' })
  const id = created.json().id
  const tag = created.headers.etag as string
  t.equal(created.json().meta.version, tag)
  const changed = await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'displayName', value: 'E. Tag' }] }, { 'if-match': tag })
  t.equal(changed.statusCode, 200)
  t.not(changed.headers.etag, tag)
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'displayName', value: 'Stale' }] }, { 'if-match': tag }), 412)
  assertScimError(t, await scim(app, idp, 'PUT', `/Users/${id}`, { schemas: [USER], userName: 'etag@example.com' }, { 'if-match': tag }), 412)
  assertScimError(t, await scim(app, idp, 'DELETE', `/Users/${id}`, undefined, { 'if-match': tag }), 412)
  t.equal((await scim(app, idp, 'GET', `/Users/${id}`)).json().displayName, 'E. Tag', 'nothing stale was written')
  const notModified = await scim(app, idp, 'GET', `/Users/${id}`, undefined, { 'if-none-match': changed.headers.etag as string })
  t.equal(notModified.statusCode, 304)
  t.equal((await scim(app, idp, 'DELETE', `/Users/${id}`, undefined, { 'if-match': changed.headers.etag as string })).statusCode, 204)
})

t.test('a change of addresses alone moves meta.version: a stale If-Match cannot undo it', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const created = await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'carol@example.com' })
  const id = created.json().id
  const added = await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'add', path: 'emails', value: [{ value: 'carol2@example.com' }] }] })
  t.equal(added.statusCode, 200, added.body)
  t.not(added.headers.etag, created.headers.etag, 'an added address is a new version')
  const undo = { schemas: [USER], userName: 'carol@example.com', emails: [{ value: 'carol@example.com', primary: true }] }
  assertScimError(t, await scim(app, idp, 'PUT', `/Users/${id}`, undo, { 'if-match': created.headers.etag as string }), 412)
  t.same((await scim(app, idp, 'GET', `/Users/${id}`)).json().emails.map((e: any) => e.value), ['carol@example.com', 'carol2@example.com'], 'nothing stale was written')
  const removed = await scim(app, idp, 'PUT', `/Users/${id}`, undo, { 'if-match': added.headers.etag as string })
  t.equal(removed.statusCode, 200)
  t.not(removed.headers.etag, added.headers.etag, 'a removed address is a new version too')
  const same = await scim(app, idp, 'PUT', `/Users/${id}`, undo, { 'if-match': removed.headers.etag as string })
  t.equal(same.headers.etag, removed.headers.etag, 'a replacement that changes nothing keeps the version')
})

t.test('an address added or removed through the API is a new SCIM version', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const created = await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'dora@example.com', password: 'dora-secret-pass-1' })
  const id = created.json().id
  const owner = bearer(await login(app, 'dora@example.com', 'dora-secret-pass-1'))
  const added = await app.inject({ method: 'POST', url: `/users/${id}/emails`, headers: owner, payload: { address: 'dora2@example.com' } })
  t.equal(added.statusCode, 201, added.body)
  const read = await scim(app, idp, 'GET', `/Users/${id}`, undefined, { 'if-none-match': created.headers.etag as string })
  t.equal(read.statusCode, 200, 'the former tag is not current: the User is sent')
  t.same(read.json().emails.map((e: any) => e.value), ['dora@example.com', 'dora2@example.com'])
  t.not(read.headers.etag, created.headers.etag)
  t.equal(read.json().meta.version, read.headers.etag)
  const stale = { schemas: [USER], userName: 'dora@example.com', emails: [{ value: 'dora@example.com', primary: true }] }
  assertScimError(t, await scim(app, idp, 'PUT', `/Users/${id}`, stale, { 'if-match': created.headers.etag as string }), 412)
  assertScimError(t, await scim(app, idp, 'DELETE', `/Users/${id}`, undefined, { 'if-match': created.headers.etag as string }), 412)
  t.equal((await scim(app, idp, 'GET', `/Users/${id}`)).json().emails.length, 2, 'nothing stale was written')
  const second = (await app.inject({ url: `/users/${id}/emails`, headers: owner })).json().items.find((e: any) => !e.primary)
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${id}/emails/${second.id}`, headers: owner })).statusCode, 204)
  const after = await scim(app, idp, 'GET', `/Users/${id}`, undefined, { 'if-none-match': read.headers.etag as string })
  t.equal(after.statusCode, 200, 'nor after a removal')
  t.equal(after.headers.etag, created.headers.etag, 'the same user and addresses as before: the same version')
  t.equal((await scim(app, idp, 'DELETE', `/Users/${id}`, undefined, { 'if-match': `${after.headers.etag as string}, W/"v9"` })).statusCode, 204,
    'a current tag among others allows the delete')
})

t.test('a ban whose end has come shows active at once, under a tag of its own; a deactivation then bans again', async (t) => {
  const app = await build(t, { bans: { everyMs: 60_000 } })
  const idp = await scimToken(app)
  const id = (await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'eve@example.com' })).json().id
  const until = new Date(Date.now() + 300).toISOString()
  t.equal((await app.inject({ method: 'PUT', url: `/users/${id}/status`, headers: idp.admin.headers, payload: { status: 'BANNED', until } })).statusCode, 200)
  const banned = await scim(app, idp, 'GET', `/Users/${id}`)
  t.equal(banned.json().active, false)
  await new Promise((resolve) => setTimeout(resolve, 400))
  const ended = await scim(app, idp, 'GET', `/Users/${id}`, undefined, { 'if-none-match': banned.headers.etag as string })
  t.equal(ended.statusCode, 200, 'the tag that showed it banned is not current')
  t.equal(ended.json().active, true, 'shown active, as the API shows it')
  t.equal(ended.headers.etag, (banned.headers.etag as string).replace(/^W\/"v(\d+)/, 'W/"v$1-ended'))
  t.equal(ended.json().meta.version, ended.headers.etag)
  const listed = await scim(app, idp, 'GET', `/Users?filter=${encodeURIComponent('userName eq "eve@example.com"')}`)
  t.match(listed.json().Resources[0], { active: true, meta: { version: ended.headers.etag } }, 'listed the same way')
  const deactivate = { schemas: [PATCH], Operations: [{ op: 'replace', value: { active: false } }] }
  const off = await scim(app, idp, 'PATCH', `/Users/${id}`, deactivate, { 'if-match': banned.headers.etag as string })
  t.equal(off.statusCode, 200, 'either tag of the version passes If-Match')
  t.equal(off.json().active, false, 'the deactivation is a ban again, not ignored')
  const user = (await app.inject({ url: `/users/${id}`, headers: idp.admin.headers })).json()
  t.match(user, { status: 'BANNED', ban: { reason: 'deprovisioned', until: null } })
})

t.test('the userName\'s address cannot be removed under it, and a replacement names a userName', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const created = await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'fay@example.com', emails: [{ value: 'fay@example.com', primary: true }, { value: 'fay2@example.com' }] })
  const id = created.json().id
  const patch = (operation: unknown) => scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [operation] })
  for (const operation of [
    { op: 'remove', path: 'emails[value eq "fay@example.com"]' },
    { op: 'remove', path: 'emails[primary eq true]' },
    { op: 'remove', path: 'emails' },
    { op: 'replace', path: 'emails', value: [] },
    { op: 'replace', path: 'emails', value: [{ value: 'fay2@example.com' }] }
  ]) {
    const res = await patch(operation)
    assertScimError(t, res, 400, 'invalidValue')
    t.match(res.json().detail, /userName/, JSON.stringify(operation))
  }
  const twoPrimaries = [{ value: 'fay@example.com', primary: true }, { value: 'fay2@example.com', primary: true }]
  assertScimError(t, await patch({ op: 'replace', path: 'emails', value: twoPrimaries }), 400, 'invalidValue')
  assertScimError(t, await scim(app, idp, 'PUT', `/Users/${id}`, { schemas: [USER], userName: 'fay@example.com', emails: twoPrimaries }), 400, 'invalidValue')
  assertScimError(t, await patch({ op: 'add', path: 'emails' }), 400, 'invalidSyntax')
  assertScimError(t, await patch({ op: 'replace', path: 'displayName' }), 400, 'invalidSyntax')
  const put = await scim(app, idp, 'PUT', `/Users/${id}`, { schemas: [USER], displayName: 'No userName' })
  assertScimError(t, put, 400, 'invalidValue')
  t.match(put.json().detail, /userName is required/)
  const now = await scim(app, idp, 'GET', `/Users/${id}`)
  t.equal(now.headers.etag, created.headers.etag, 'nothing changed')
  t.same(now.json().emails.map((e: any) => [e.value, e.primary]), [['fay@example.com', true], ['fay2@example.com', false]])
  const moved = await patch({ op: 'replace', path: 'emails', value: [{ value: 'fay2@example.com', primary: true }] })
  t.equal(moved.statusCode, 200, 'a replacement that makes another address primary moves userName with it')
  t.match(moved.json(), { userName: 'fay2@example.com', emails: [{ value: 'fay2@example.com', primary: true }] })
  // A new userName alone, as Okta and Entra ID send it: an address added, verified and made primary; the others stay.
  const renamed = await patch({ op: 'replace', path: 'userName', value: 'fay.new@example.com' })
  t.equal(renamed.statusCode, 200, renamed.body)
  t.same(renamed.json().emails.map((e: any) => [e.value, e.primary]), [['fay2@example.com', false], ['fay.new@example.com', true]])
  const replaced = await scim(app, idp, 'PUT', `/Users/${id}`, { schemas: [USER], userName: 'fay.third@example.com' })
  t.equal(replaced.statusCode, 200, replaced.body)
  t.match(replaced.json(), { userName: 'fay.third@example.com' })
  t.equal(replaced.json().emails.length, 3, 'a PUT without emails leaves them as they are')
  const emails = (await app.inject({ url: `/users/${id}/emails`, headers: idp.admin.headers })).json().items
  t.same(emails.map((e: any) => [e.address, e.primary, e.verified]), [['fay2@example.com', false, true], ['fay.new@example.com', false, true], ['fay.third@example.com', true, true]])
})

t.test('what the API refuses, SCIM refuses: addresses, the address limit, name types; names in any case', async (t) => {
  const app = await build(t, { env: { MAX_EMAILS_PER_USER: '3' } })
  const idp = await scimToken(app)
  for (const userName of ['sur\ud800x@example.com', 'nul\u0000x@example.com', 'ümlaut@example.com', 'a b@example.com']) {
    assertScimError(t, await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName }), 400, 'invalidValue')
  }
  const mixed = await scim(app, idp, 'POST', '/Users', { SCHEMAS: [USER], USERNAME: 'mixed@example.com', DisplayName: 'Mixed Case', NAME: { GivenName: 'Mixed' } })
  t.equal(mixed.statusCode, 201, mixed.body)
  t.match(mixed.json(), { userName: 'mixed@example.com', displayName: 'Mixed Case' })
  const id = mixed.json().id
  const many = Array.from({ length: 3 }, (_, i) => ({ value: `extra${i}@example.com` }))
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'add', path: 'emails', value: many }] }), 409)
  t.equal((await scim(app, idp, 'GET', `/Users/${id}`)).json().emails.length, 1, 'none of them added')
  const two = await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'add', path: 'emails', value: many.slice(0, 2) }] })
  t.equal(two.statusCode, 200, 'up to the limit')
  assertScimError(t, await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'four@example.com', emails: many.map((e, i) => ({ value: `four${i}@example.com` })) }), 409)
  for (const op of [
    { op: 'replace', path: 'name.givenName', value: 42 },
    { op: 'replace', path: 'displayName', value: { a: 1 } },
    { op: 'replace', path: 'name', value: 'Just A String' },
    { op: 'replace', value: { name: { familyName: ['x'] } } }
  ]) {
    assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [op] }), 400, 'invalidValue')
  }
  assertScimError(t, await scim(app, idp, 'PUT', `/Users/${id}`, { schemas: [USER], userName: 'mixed@example.com', name: { givenName: 7, familyName: 'Seven' } }), 400, 'invalidValue')
  t.equal((await scim(app, idp, 'GET', `/Users/${id}`)).json().displayName, 'Mixed Case', 'the name as it was')
})

t.test('a SCIM body is JSON: a form or plain text is 415 in SCIM\'s shape, naming SCIM\'s type', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  for (const [type, payload] of [['application/x-www-form-urlencoded', 'userName=form%40example.com'], ['text/plain', 'userName']] as const) {
    const res = await app.inject({ method: 'POST', url: '/scim/v2/Users', headers: { ...idp.headers, 'content-type': type }, payload })
    assertScimError(t, res, 415)
    t.match(res.json().detail, /application\/scim\+json/, type)
  }
  t.equal((await scim(app, idp, 'GET', byUserName('form@example.com'))).json().totalResults, 0, 'nothing created')
})

t.test('discovery: each resource type and schema at the location its meta names', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  for (const list of ['/ResourceTypes', '/Schemas']) {
    for (const resource of (await scim(app, idp, 'GET', list)).json().Resources) {
      const location = resource.meta.location as string
      const one = await app.inject({ url: location, headers: idp.headers })
      t.equal(one.statusCode, 200, location)
      t.same(one.json(), resource, `${location}: the resource the list holds`)
    }
  }
  assertScimError(t, await scim(app, idp, 'GET', '/ResourceTypes/Group'), 404)
  assertScimError(t, await scim(app, idp, 'GET', '/Schemas/urn:ietf:params:scim:schemas:core:2.0:Group'), 404)
})

t.test('an admin\'s token acts as the admin; the last admin is kept', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const created = await scim(app, admin, 'POST', '/Users', { schemas: [USER], userName: 'by-admin@example.com' })
  t.equal(created.statusCode, 201)
  const events = await eventsOf(app, Number(created.json().id))
  t.same(events[0]!.actor, { type: 'admin', id: admin.id })
  const off = await scim(app, admin, 'PATCH', `/Users/${admin.id}`, { schemas: [PATCH], Operations: [{ op: 'replace', value: { active: false } }] })
  assertScimError(t, off, 409)
  assertScimError(t, await scim(app, admin, 'DELETE', `/Users/${admin.id}`), 409)
})

t.test('the total of an unfiltered list counts every user, however it came and went', async (t) => {
  const app = await build(t)
  const idp = await scimToken(app)
  const total = async () => (await scim(app, idp, 'GET', '/Users?count=0')).json().totalResults
  const counted = async () => Number((await app.db.selectFrom('users').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  const agrees = async (what: string) => t.equal(await total(), await counted(), what)
  await agrees('the admin made at start')
  const signedUp = await newUser(app)
  await agrees('a sign-up')
  const byScim = Number((await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'dir@example.com' })).json().id)
  await agrees('a SCIM create')
  t.equal((await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'dir@example.com' })).statusCode, 409)
  await agrees('not a refused one')
  const lines = ['a', 'b', 'c', 'a'].map((n) => JSON.stringify({ email: `${n}@imported.example`, name: n })).join('\n') + '\n'
  const started = await app.inject({ method: 'POST', url: '/imports', headers: { ...idp.admin.headers, 'content-type': 'application/x-ndjson' }, payload: lines })
  t.equal(started.statusCode, 202)
  for (let i = 0; i < 500; i++) {
    const status = (await app.inject({ url: started.headers.location as string, headers: idp.admin.headers })).json().status
    if (status === 'succeeded' || status === 'failed') break
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.equal(await counted(), 6, 'three imported, a repeated line not')
  await agrees('an import')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${signedUp.id}`, headers: idp.admin.headers })).statusCode, 204)
  await agrees('a deletion')
  t.equal((await scim(app, idp, 'DELETE', `/Users/${byScim}`)).statusCode, 204)
  await agrees('a SCIM delete')
  t.equal(await total(), 4)
  const page = (await scim(app, idp, 'GET', '/Users?count=4')).json()
  t.match(page, { totalResults: 4, itemsPerPage: 4 }, 'a full page tells the same total')
})

t.test('the tally\'s migration counts the users already there', async (t) => {
  const { db, migrateTo } = await migratingDatabase(t)
  await migrateTo('0017_idempotency_user')
  const now = Date.now()
  for (const name of ['a', 'b', 'c']) {
    await sql`insert into users (name, name_search, password_hash, status, role, version, created_at, updated_at)
      values (${name}, ${name}, 'x', 'ACTIVE', 'user', 1, ${now}, ${now})`.execute(db)
  }
  await migrateTo('0018_user_tally')
  const tally = await sql<{ slots: number | string; users: number | string }>`select count(*) as slots, sum(users) as users from user_tally`.execute(db)
  t.same([Number(tally.rows[0]!.slots), Number(tally.rows[0]!.users)], [16, 3])
})

t.test('a user whose deletion is scheduled is gone for SCIM, its address held, until it is restored', async (t) => {
  const app = await build(t, { deletions: { everyMs: 50 }, env: { ACCOUNT_DELETION_GRACE_SECONDS: '600' } })
  const idp = await scimToken(app)
  const admin = idp.admin.headers
  const created = (await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'leaving@example.com', externalId: 'ext-leaving' })).json()
  const other = Number((await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'staying@example.com' })).json().id)
  const total = async () => (await scim(app, idp, 'GET', '/Users?count=0')).json().totalResults
  t.equal(await total(), 3, 'the admin and two')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${created.id}`, headers: admin })).statusCode, 202)

  assertScimError(t, await scim(app, idp, 'GET', `/Users/${created.id}`), 404)
  t.equal(await total(), 2, 'left out of the total')
  const rows = async (q: string) => Number(Object.values((await sql.raw<Record<string, unknown>>(q).execute(app.db)).rows[0]!)[0])
  t.equal(await rows('select sum(users) from user_tally'), await rows('select count(*) from users'), 'while the tally counts every row')
  const page = (await scim(app, idp, 'GET', '/Users')).json()
  t.same(page.Resources.map((u: { id: string }) => u.id), [String(idp.admin.id), String(other)], 'and of the list')
  t.equal(page.totalResults, 2)
  t.equal((await scim(app, idp, 'GET', byUserName('leaving@example.com'))).json().totalResults, 0, 'a lookup finds none')
  t.equal((await scim(app, idp, 'GET', `/Users?filter=${encodeURIComponent('externalId eq "ext-leaving" or userName sw "s"')}`)).json().totalResults, 1)
  assertScimError(t, await scim(app, idp, 'PATCH', `/Users/${created.id}`, { schemas: [PATCH], Operations: [{ op: 'replace', value: { active: false } }] }), 404)
  assertScimError(t, await scim(app, idp, 'PUT', `/Users/${created.id}`, { schemas: [USER], userName: 'leaving@example.com' }), 404)
  assertScimError(t, await scim(app, idp, 'DELETE', `/Users/${created.id}`, undefined, { 'if-match': created.meta.version }), 404)
  assertScimError(t, await scim(app, idp, 'DELETE', `/Users/${created.id}`), 404)
  assertScimError(t, await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'LEAVING@example.com' }), 409, 'uniqueness')
  assertScimError(t, await scim(app, idp, 'POST', '/Users', { schemas: [USER], userName: 'new@example.com', externalId: 'ext-leaving' }), 409, 'uniqueness')
  t.equal((await app.inject({ url: `/users/${created.id}`, headers: admin })).statusCode, 200, 'the API\'s admins still read it')

  t.equal((await app.inject({ method: 'POST', url: `/users/${created.id}/restore`, headers: admin })).statusCode, 200)
  t.equal((await scim(app, idp, 'GET', `/Users/${created.id}`)).statusCode, 200, 'restored, it is back')
  t.equal(await total(), 3)
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${created.id}`, headers: admin })).statusCode, 202)
  t.equal(await total(), 2)
  await app.db.updateTable('users').set({ deletion_scheduled_at: Date.now() }).where('id', '=', Number(created.id)).execute()
  for (let i = 0; i < 100 && await app.db.selectFrom('users').select('id').where('id', '=', Number(created.id)).executeTakeFirst(); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assertProblem(t, await app.inject({ url: `/users/${created.id}`, headers: admin }), 404, 'USER_NOT_FOUND')
  t.equal(await total(), 2, 'made final, it does not leave the total twice')
})
