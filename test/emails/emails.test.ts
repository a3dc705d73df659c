import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, markVerified, newUser, type TestUser } from '../helpers.js'

const addEmail = (app: App, who: TestUser, userId: number, address: string) =>
  app.inject({ method: 'POST', url: `/users/${userId}/emails`, headers: who.headers, payload: { address } })

async function primaries(app: App, userId: number) {
  return app.db.selectFrom('emails').select(['id', 'address']).where('primary_user_id', '=', userId).execute()
}

t.test('the e-mail collection and its items', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { email: 'first@example.com' })
  const added = await addEmail(app, user, user.id, 'Second@Example.com')
  t.equal(added.statusCode, 201)
  const email = added.json()
  t.equal(added.headers.location, `/users/${user.id}/emails/${email.id}`)
  t.match(email, { href: `/users/${user.id}/emails/${email.id}`, address: 'Second@Example.com', primary: false })

  const list = await app.inject({ url: `/users/${user.id}/emails`, headers: user.headers })
  t.equal(list.statusCode, 200)
  const body = list.json()
  t.equal(body.href, `/users/${user.id}/emails?limit=50`)
  t.same(body.items.map((e: { address: string; primary: boolean }) => [e.address, e.primary]), [['first@example.com', true], ['Second@Example.com', false]])
  t.ok(body.items.every((e: { href: string; id: number }) => e.href === `/users/${user.id}/emails/${e.id}`), 'each item carries its href')
  t.equal(body.next, null)

  const paged = (await app.inject({ url: `/users/${user.id}/emails?limit=1`, headers: user.headers })).json()
  t.equal(paged.items.length, 1)
  const rest = (await app.inject({ url: paged.next, headers: user.headers })).json()
  t.same(rest.items.map((e: { id: number }) => e.id), [email.id], 'the second page')

  const one = await app.inject({ url: `/users/${user.id}/emails/${email.id}`, headers: user.headers })
  t.equal(one.statusCode, 200)
  t.same(one.json(), email)

  const changed = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${email.id}`, headers: user.headers, payload: { address: 'changed@example.com' } })
  t.equal(changed.statusCode, 200)
  t.equal(changed.json().id, email.id, 'same id')
  t.equal(changed.json().address, 'changed@example.com')

  const primary = await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })
  t.equal(primary.json().address, 'first@example.com', 'the single-address path answers the primary')
})

t.test('addresses are unique across users, case-insensitively, and limited per user', async (t) => {
  const app = await build(t, { env: { MAX_EMAILS_PER_USER: '3' } })
  const a = await newUser(app, { email: 'a@example.com' })
  const b = await newUser(app)
  assertProblem(t, await addEmail(app, b, b.id, 'A@EXAMPLE.COM'), 409, 'EMAIL_TAKEN', 'another user has it')
  assertProblem(t, await addEmail(app, a, a.id, 'a@Example.com'), 409, 'EMAIL_TAKEN', 'the user has it already')
  const primary = (await app.inject({ url: `/users/${b.id}/email`, headers: b.headers })).json()
  const put = await app.inject({ method: 'PUT', url: `/users/${b.id}/email`, headers: b.headers, payload: { email: 'A@example.com' } })
  assertProblem(t, put, 409, 'EMAIL_TAKEN', 'placing a taken address')
  const put2 = await app.inject({ method: 'PUT', url: `/users/${b.id}/emails/${primary.id}`, headers: b.headers, payload: { address: 'a@EXAMPLE.com' } })
  assertProblem(t, put2, 409, 'EMAIL_TAKEN', 'changing to a taken address')
  t.equal((await addEmail(app, a, a.id, 'a2@example.com')).statusCode, 201)
  t.equal((await addEmail(app, a, a.id, 'a3@example.com')).statusCode, 201)
  assertProblem(t, await addEmail(app, a, a.id, 'a4@example.com'), 409, 'EMAIL_LIMIT')
  const rows = await app.db.selectFrom('emails').select('id').where('user_id', '=', a.id).execute()
  t.equal(rows.length, 3, 'the limit held')
  assertProblem(t, await addEmail(app, a, a.id, 'no-at-sign'), 400, 'VALIDATION_FAILED')
})

t.test('an address is reached only under its own user', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const a = await newUser(app)
  const b = await newUser(app)
  const bEmail = (await addEmail(app, b, b.id, 'b2@example.com')).json()
  for (const who of [a, admin]) {
    assertProblem(t, await app.inject({ url: `/users/${a.id}/emails/${bEmail.id}`, headers: who.headers }), 404, 'EMAIL_NOT_FOUND', 'GET across parents')
    assertProblem(t, await app.inject({ method: 'PUT', url: `/users/${a.id}/emails/${bEmail.id}`, headers: who.headers, payload: { address: 'stolen@example.com' } }), 404, 'EMAIL_NOT_FOUND', 'PUT across parents')
  }
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${a.id}/emails/${bEmail.id}`, headers: a.headers }), 404, 'EMAIL_NOT_FOUND', 'DELETE across parents')
  assertProblem(t, await app.inject({ url: `/users/${b.id}/emails/${bEmail.id}`, headers: a.headers }), 401, 'FORBIDDEN', 'another user\'s address')
  assertProblem(t, await app.inject({ url: '/users/999999/emails', headers: admin.headers }), 404, 'USER_NOT_FOUND', 'unknown user')
  assertProblem(t, await app.inject({ url: '/users/999999/email', headers: admin.headers }), 404, 'USER_NOT_FOUND', 'unknown user, single path')
  assertProblem(t, await addEmail(app, admin, 999999, 'ghost@example.com'), 404, 'USER_NOT_FOUND', 'add to unknown user')
  const still = await app.db.selectFrom('emails').select('address').where('id', '=', bEmail.id).executeTakeFirstOrThrow()
  t.equal(still.address, 'b2@example.com')
})

t.test('deletes are for the owner only, admins included in the refusal', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'owner@example.com' })
  const other = await newUser(app)
  const second = (await addEmail(app, user, user.id, 'owner2@example.com')).json()
  for (const who of [admin, other]) {
    for (const url of [`/users/${user.id}/emails/${second.id}`, `/users/${user.id}/email`]) {
      const res = await app.inject({ method: 'DELETE', url, headers: who.headers })
      assertProblem(t, res, 401, 'FORBIDDEN', `${who === admin ? 'admin' : 'other'} DELETE ${url}`)
    }
  }
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${user.id}/email` }), 401, 'UNAUTHENTICATED')
  t.equal((await app.db.selectFrom('emails').select('id').where('user_id', '=', user.id).execute()).length, 2, 'nothing removed')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${second.id}`, headers: user.headers })).statusCode, 204)
})

t.test('removing the primary promotes the oldest verified address before any unverified one', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { email: 'v1@example.com' })
  await addEmail(app, user, user.id, 'older-unverified@example.com')
  const verified = (await addEmail(app, user, user.id, 'newer-verified@example.com')).json()
  // test/verification/flows.test.ts verifies through real mail; here only which address is promoted is at stake.
  await markVerified(app, 'newer-verified@example.com')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/email`, headers: user.headers })).statusCode, 204)
  const primary = (await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })).json()
  t.equal(primary.id, verified.id, 'the verified address, though newer')
})

t.test('removing the primary promotes the oldest remaining address', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { email: 'p1@example.com' })
  const p2 = (await addEmail(app, user, user.id, 'p2@example.com')).json()
  await addEmail(app, user, user.id, 'p3@example.com')
  const before = await app.inject({ url: `/users/${user.id}`, headers: user.headers })
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/email`, headers: user.headers })).statusCode, 204)
  const primary = (await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })).json()
  t.equal(primary.id, p2.id, 'the oldest remaining is primary')
  t.equal(primary.primary, true)
  const after = await app.inject({ url: `/users/${user.id}`, headers: user.headers })
  t.equal(after.json().email, 'p2@example.com', 'the user shows it')
  t.not(after.headers.etag, before.headers.etag, 'and its ETag moved')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${p2.id}`, headers: user.headers })).statusCode, 204)
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json().email, 'p3@example.com', 'through /emails/{id} too')
  t.equal((await primaries(app, user.id)).length, 1)
})

t.test('REQUIRE_EMAIL keeps the last address', async (t) => {
  const app = await build(t)
  const user = await newUser(app, { email: 'only@example.com' })
  const only = (await app.inject({ url: `/users/${user.id}/email`, headers: user.headers })).json()
  const viaSingle = await app.inject({ method: 'DELETE', url: `/users/${user.id}/email`, headers: user.headers })
  assertProblem(t, viaSingle, 401, 'EMAIL_REQUIRED', 'single-address path')
  t.match(viaSingle.headers['www-authenticate'], /insufficient_scope/)
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${only.id}`, headers: user.headers }), 401, 'EMAIL_REQUIRED', 'by id')
  t.equal((await primaries(app, user.id)).length, 1, 'still there')
})

t.test('without REQUIRE_EMAIL a user may have no address, and the single path creates one', async (t) => {
  const app = await build(t, { env: { REQUIRE_EMAIL: 'false' } })
  const user = await newUser(app, { email: 'solo@example.com' })
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/email`, headers: user.headers })).statusCode, 204)
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json().email, null)
  assertProblem(t, await app.inject({ url: `/users/${user.id}/email`, headers: user.headers }), 404, 'EMAIL_NOT_FOUND')
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${user.id}/email`, headers: user.headers }), 404, 'EMAIL_NOT_FOUND', 'nothing to delete')
  const created = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: { ...user.headers, 'content-type': 'text/plain' }, payload: 'again@example.com' })
  t.equal(created.statusCode, 201)
  t.equal(created.headers.location, `/users/${user.id}/emails/${created.json().id}`)
  t.equal(created.json().primary, true)
  const added = (await addEmail(app, user, user.id, 'more@example.com')).json()
  t.equal(added.primary, false)

  const other = await newUser(app, { email: 'other-solo@example.com' })
  await app.inject({ method: 'DELETE', url: `/users/${other.id}/email`, headers: other.headers })
  const first = (await addEmail(app, other, other.id, 'first-again@example.com')).json()
  t.equal(first.primary, true, 'the first address becomes primary')
  t.equal((await app.inject({ url: `/users/${other.id}`, headers: other.headers })).json().email, 'first-again@example.com')
})

t.test('concurrent adds of one address: exactly one 201, the rest 409', async (t) => {
  const app = await build(t)
  const users = await Promise.all(Array.from({ length: 8 }, () => newUser(app)))
  const results = await Promise.all(users.map((u) => addEmail(app, u, u.id, 'Race@Example.com')))
  const codes = results.map((r) => r.statusCode).sort()
  t.same(codes, [201, 409, 409, 409, 409, 409, 409, 409], codes.join(','))
  for (const r of results.filter((r) => r.statusCode === 409)) t.equal(r.json().code, 'EMAIL_TAKEN')
  const rows = await app.db.selectFrom('emails').select('id').where('address_norm', '=', 'race@example.com').execute()
  t.equal(rows.length, 1)
})

t.test('concurrent primary changes leave exactly one primary', async (t) => {
  const app = await build(t, { env: { MAX_EMAILS_PER_USER: '50' } })
  const user = await newUser(app)
  for (let i = 0; i < 6; i++) await addEmail(app, user, user.id, `c${i}@example.com`)
  const requests = []
  for (let i = 0; i < 5; i++) {
    requests.push(app.inject({ method: 'DELETE', url: `/users/${user.id}/email`, headers: user.headers }))
    requests.push(app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email: `put${i}@example.com` } }))
    requests.push(addEmail(app, user, user.id, `new${i}@example.com`))
  }
  const results = await Promise.all(requests)
  t.ok(results.every((r) => r.statusCode < 500), results.map((r) => r.statusCode).join(','))
  t.equal((await primaries(app, user.id)).length, 1, 'exactly one primary')
  const me = (await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json()
  t.equal(me.email, (await primaries(app, user.id))[0]!.address, 'and the user shows it')
})
