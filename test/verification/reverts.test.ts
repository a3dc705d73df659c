import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, markVerified, newUser, type TestUser } from '../helpers.js'
import { codeIn, otherCode as other, TestSmtp, tokenIn } from '../mail/smtp.js'

const FAST = { mail: { pollMs: 50 } }

interface Address { id: number; address: string; primary: boolean; verified: boolean }

async function addresses(app: App, admin: TestUser, userId: number): Promise<Address[]> {
  const res = await app.inject({ method: 'GET', url: `/users/${userId}/emails`, headers: admin.headers })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json<{ items: Address[] }>().items
}

const revert = (app: App, payload: Record<string, string>, remoteAddress?: string) =>
  app.inject({ method: 'POST', url: '/auth/email-reverts', payload, ...(remoteAddress ? { remoteAddress } : {}) })

/** A user whose verified primary `former` was replaced, in place, by `taker` through the single-address path. */
async function replaced(app: App, smtp: TestSmtp, former: string, taker: string) {
  const user = await newUser(app, { email: former })
  await markVerified(app, former)
  const put = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email: taker } })
  if (put.statusCode !== 200) throw new Error(put.body)
  // The sign-up's verification mail first, then the revert.
  const mail = await smtp.waitFor(former, 2)
  return { user, mail }
}

t.test('another address made primary: the former one is mailed a revert, which takes the change back', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'owner@example.com' })
  await markVerified(app, user.email)
  const added = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'taker@example.com' } })
  t.equal(added.statusCode, 201, added.body)
  await markVerified(app, 'taker@example.com')
  const made = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${added.json().id}`, headers: user.headers, payload: { primary: true } })
  t.equal(made.statusCode, 200, made.body)

  const mail = await smtp.waitFor(user.email, 2)
  const code = codeIn(mail)
  t.match(mail.subject, new RegExp(`^${code} is your Roster code`), 'the code and the word "code" in the subject')
  t.match(mail.text, 'taker@example.com', 'it says which address is primary now')
  const stored = await app.db.selectFrom('email_reverts').selectAll().execute()
  t.equal(stored.length, 1)
  t.notOk(JSON.stringify(stored).includes(code) || JSON.stringify(stored).includes(tokenIn(mail)), 'only hashes are stored')

  const res = await revert(app, { token: tokenIn(mail) })
  t.equal(res.statusCode, 204, res.body)
  const after = await addresses(app, admin, user.id)
  t.same(after.map((a) => [a.address, a.primary, a.verified]), [['owner@example.com', true, true], ['taker@example.com', false, false]],
    'the former address is the verified primary again; the one that replaced it is no longer verified')
  t.equal((await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: user.headers })).statusCode, 401, 'every session ended')
  assertProblem(t, await revert(app, { token: tokenIn(mail) }), 400, 'INVALID_TOKEN', 'a revert works once')
  assertProblem(t, await revert(app, { email: user.email, code }), 400, 'INVALID_TOKEN', 'its code dies with it')

  // The address that replaced it can no longer recover the account.
  const mailedBefore = smtp.to('taker@example.com').length
  await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'taker@example.com' } })
  await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: 'taker@example.com' } })

  const events = await app.inject({ method: 'GET', url: `/events?user_id=${user.id}&limit=100`, headers: admin.headers })
  const types = events.json<{ items: Array<{ type: string; data: { reason?: string; address?: string } }> }>().items
  t.ok(types.some((e) => e.type === 'session.ended' && e.data.reason === 'primary_reverted'), 'session.ended, reason primary_reverted')
  t.ok(types.some((e) => e.type === 'email.primary_changed' && e.data.address === user.email), 'email.primary_changed back to the owner')
  t.ok(types.some((e) => e.type === 'email.changed' && e.data.address === 'taker@example.com'), 'email.changed: the taker\'s address unverified')
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.equal(smtp.to('taker@example.com').length, mailedBefore, 'neither a reset nor a sign-in code went to the address that had replaced it')
})

t.test('the primary replaced in place: the address and the code re-add it, verified and primary', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const { user, mail } = await replaced(app, smtp, 'first@example.com', 'second@example.com')
  t.same((await addresses(app, admin, user.id)).map((a) => a.address), ['second@example.com'], 'the former address is gone')
  assertProblem(t, await revert(app, { email: 'first@example.com', code: other(codeIn(mail)) }), 400, 'INVALID_TOKEN')
  const res = await revert(app, { email: 'FIRST@example.com', code: codeIn(mail) })
  t.equal(res.statusCode, 204, res.body)
  const after = await addresses(app, admin, user.id)
  t.same(after.map((a) => [a.address, a.primary, a.verified]), [['first@example.com', true, true]], 'the address set by the change is gone with it')
  const login = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'first@example.com', password: user.password } })
  t.equal(login.statusCode, 201, 'the owner signs in with it again')
})

t.test('the former primary is held for its user: another sign-up with it is 409, and the revert re-adds it', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const { user, mail } = await replaced(app, smtp, 'wanted@example.com', 'mine@example.com')
  assertProblem(t, await app.inject({ method: 'POST', url: '/users', payload: { name: 'Other', email: 'wanted@example.com', password: 'password-123' } }),
    409, 'EMAIL_TAKEN')
  t.same((await addresses(app, admin, user.id)).map((a) => a.address), ['mine@example.com'])
  t.equal((await revert(app, { token: tokenIn(mail) })).statusCode, 204)
  t.same((await addresses(app, admin, user.id)).map((a) => a.address), ['wanted@example.com'], 'back, and the address the change set gone')
})

t.test('an address another user holds anyway: 409 EMAIL_TAKEN at the revert, and nothing changes', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const { user, mail } = await replaced(app, smtp, 'wanted@example.com', 'mine@example.com')
  // Written past the hold, as an address already held before reverts existed would stand.
  const other = await newUser(app, { email: 'other@example.com' })
  await app.db.updateTable('emails').set({ address: 'wanted@example.com', address_norm: 'wanted@example.com' }).where('user_id', '=', other.id).execute()
  await markVerified(app, 'wanted@example.com')
  assertProblem(t, await revert(app, { token: tokenIn(mail) }), 409, 'EMAIL_TAKEN')
  t.same((await addresses(app, admin, user.id)).map((a) => a.address), ['mine@example.com'])
  t.equal((await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: user.headers })).statusCode, 200, 'sessions live on')
  t.equal((await app.inject({ method: 'GET', url: `/users/${other.id}`, headers: other.headers })).statusCode, 200)
  t.equal((await app.db.selectFrom('email_reverts').selectAll().execute()).length, 1, 'the revert is not spent by a refusal')
  // The right code refused for another reason is no wrong guess: the address's 10 wrong codes a day stay untouched.
  const byCode = []
  for (let i = 0; i < 12; i++) byCode.push((await revert(app, { email: 'wanted@example.com', code: codeIn(mail) })).statusCode)
  t.same(byCode, Array(12).fill(409), 'the right code, refused twelve times with 409, never 429')
})

t.test('a former primary never verified is mailed nothing; bad input changes nothing', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const user = await newUser(app, { email: 'typo@example.com' })
  await smtp.waitFor('typo@example.com')
  for (const email of ['right@example.com', 'typo@example.com', 'right2@example.com']) {
    t.equal((await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email } })).statusCode, 200)
  }
  await smtp.waitFor('right2@example.com')
  // What is mailed is written to the outbox in the change's own transaction: nothing there means nothing will go.
  const queued = await app.db.selectFrom('outbox').select('template').where('recipient', '=', 'typo@example.com').execute()
  t.same(queued.map((m) => m.template), ['verify-address'], 'its sign-up\'s verification alone: replacing it, twice, mailed it nothing')
  t.equal(smtp.to('typo@example.com').length, 1)
  t.equal((await app.db.selectFrom('email_reverts').selectAll().execute()).length, 0)
  assertProblem(t, await revert(app, { email: 'typo@example.com' }), 400, 'VALIDATION_FAILED')
  assertProblem(t, await revert(app, { token: 'x'.repeat(43), email: 'typo@example.com' }), 400, 'VALIDATION_FAILED')
  assertProblem(t, await revert(app, { email: 'typo@example.com', code: '000000' }), 400, 'INVALID_TOKEN')
  assertProblem(t, await revert(app, { token: 'not-a-token' }), 400, 'INVALID_TOKEN')
})

t.test('revert codes: five wrong tries kill one, however many guesses come at once; an expired revert is refused', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url, LOGIN_MAX_FAILURES_PER_CLIENT: '100000' } })
  const { mail } = await replaced(app, smtp, 'guessed@example.com', 'thief@example.com')
  const code = codeIn(mail)
  const guesses = await Promise.all(Array.from({ length: 200 }, (_, i) =>
    revert(app, { email: 'guessed@example.com', code: other(code, i + 1) }, `10.7.${Math.floor(i / 250)}.${(i % 250) + 1}`)))
  t.ok(guesses.every((r) => r.statusCode === 400 || r.statusCode === 429), 'every guess refused')
  const rows = await app.db.selectFrom('email_reverts').select(['code_tries']).execute()
  t.same(rows.map((r) => r.code_tries), [5], 'five tries were taken')
  t.equal((await revert(app, { email: 'guessed@example.com', code })).statusCode >= 400, true, 'the right code is dead')
  // The token still works until it expires.
  await app.db.updateTable('email_reverts').set({ expires_at: Date.now() - 1 }).execute()
  assertProblem(t, await revert(app, { token: tokenIn(mail) }), 400, 'INVALID_TOKEN', 'expired')
})

t.test('a revert used spends every other revert of the user: a chain of changes cannot be replayed', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const { user, mail } = await replaced(app, smtp, 'a@example.com', 'b@example.com')
  await markVerified(app, 'b@example.com')
  const again = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email: 'c@example.com' } })
  t.equal(again.statusCode, 200)
  const fromB = await smtp.waitFor('b@example.com', 2)
  t.equal((await revert(app, { token: tokenIn(mail) })).statusCode, 204)
  assertProblem(t, await revert(app, { token: tokenIn(fromB) }), 400, 'INVALID_TOKEN', 'the later change\'s revert died with the first one used')
  const primary = (await addresses(app, admin, user.id)).find((a) => a.primary)
  t.equal(primary?.address, 'a@example.com')
})
