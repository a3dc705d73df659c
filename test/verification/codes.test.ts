import t from 'tap'
import type { App } from '../../src/app.js'
import { assertProblem, bearer, build, newUser, session } from '../helpers.js'
import { codeIn, otherCode as other, TestSmtp, tokenIn } from '../mail/smtp.js'

const FAST = { mail: { pollMs: 50 } }

const tries = async (app: App, purpose: 'verify' | 'reset' | 'signin') =>
  (await app.db.selectFrom('email_tokens').select(['code_tries']).where('purpose', '=', purpose).execute()).map((r) => r.code_tries)

t.test('a verification mail carries a code; the address and the code verify it, once', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const user = await newUser(app, { email: 'coded@example.com' })
  const mail = await smtp.waitFor(user.email)
  const code = codeIn(mail)
  t.match(mail.subject, new RegExp(`^${code} is your Roster code`), 'the code, and the word "code", in the subject')
  t.match(mail.html, code)
  const wrong = await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: user.email, code: other(code) } })
  assertProblem(t, wrong, 400, 'INVALID_TOKEN')
  const ok = await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: 'CODED@example.com', code } })
  t.equal(ok.statusCode, 200, ok.body)
  t.equal(ok.json().verified, true)
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: user.email, code } }), 400, 'INVALID_TOKEN', 'used once')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { token: tokenIn(mail) } }), 400, 'INVALID_TOKEN', 'its token is spent with it')
  // One of the two, whole.
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: user.email } }), 400, 'VALIDATION_FAILED')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { token: tokenIn(mail), code } }), 400, 'VALIDATION_FAILED')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: user.email, code: '12345' } }), 400, 'VALIDATION_FAILED')
  const stored = await app.db.selectFrom('email_tokens').select(['code_hash']).execute()
  t.notOk(JSON.stringify(stored).includes(code), 'only a hash of a code is stored')
})

t.test('five wrong codes kill a code; a parallel attacker gets no more tries than that', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url, LOGIN_MAX_FAILURES_PER_CLIENT: '100000' } })
  const user = await newUser(app, { email: 'guessed@example.com' })
  const code = codeIn(await smtp.waitFor(user.email))
  for (let i = 1; i <= 5; i++) {
    assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: user.email, code: other(code, i) } }), 400, 'INVALID_TOKEN')
  }
  t.same(await tries(app, 'verify'), [5])
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: user.email, code } }), 400, 'INVALID_TOKEN', 'the right code is dead after five wrong ones')

  // Hundreds of guesses at once at a reset code, from as many client addresses: none is the code.
  await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: user.email } })
  const resetCode = codeIn(await smtp.waitFor(user.email, 2))
  const guesses = await Promise.all(Array.from({ length: 300 }, (_, i) => app.inject({
    method: 'POST', url: '/auth/password-resets/confirm', remoteAddress: `10.9.${Math.floor(i / 250)}.${(i % 250) + 1}`,
    payload: { email: user.email, code: other(resetCode, i + 1), password: 'guessed-password-1' }
  })))
  t.ok(guesses.every((r) => r.statusCode === 400 || r.statusCode === 429), 'every guess refused')
  t.same(await tries(app, 'reset'), [5], 'five tries were taken, however many came at once')
  const late = await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { email: user.email, code: resetCode, password: 'guessed-password-1' } })
  // The ten guesses of the address's day were all taken (five killed the code, five found it dead).
  assertProblem(t, late, 429, 'RATE_LIMITED', 'the real code is refused too: dead, and the address takes no more guesses today')
  t.equal((await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password } })).statusCode, 201, 'the password is unchanged')
})

t.test('wrong codes count against the client like wrong passwords', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url, LOGIN_MAX_FAILURES_PER_CLIENT: '3' } })
  const user = await newUser(app)
  await smtp.waitFor(user.email)
  const answers = []
  for (let i = 0; i < 5; i++) answers.push((await app.inject({ method: 'POST', url: '/auth/email-verifications', remoteAddress: '10.1.1.1', payload: { email: user.email, code: '000000' } })).statusCode)
  t.same(answers.slice(0, 3), [400, 400, 400])
  t.equal(answers[4], 429, 'refused past the client\'s limit of failed checks')
})

t.test('a password reset by address and code', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const user = await newUser(app, { email: 'reset.code@example.com' })
  await smtp.waitFor(user.email)
  await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: user.email } })
  const mail = await smtp.waitFor(user.email, 2)
  t.match(mail.subject, /^[0-9]{6} is your Roster code: reset your password$/)
  const res = await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { email: user.email, code: codeIn(mail), password: 'brand-new-password' } })
  t.equal(res.statusCode, 204, res.body)
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: user.headers })).statusCode, 401, 'every session ended')
  t.equal((await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: 'brand-new-password' } })).statusCode, 201)
  const address = (await app.inject({ url: `/users/${user.id}/email`, headers: bearer((await session(app, user.email, 'brand-new-password')).token) })).json()
  t.equal(address.verified, true, 'reading the mail proved the address')
})

t.test('sign-in by e-mail code: asked for, mailed, exchanged for a session once', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const user = await newUser(app, { email: 'signin@example.com' })
  await smtp.waitFor(user.email)
  const asked = await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: user.email } })
  t.equal(asked.statusCode, 202)
  const nobody = await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: 'nobody@example.com' } })
  t.equal(nobody.body, asked.body, 'the same answer for an address nobody has')
  const mail = await smtp.waitFor(user.email, 2)
  t.match(mail.subject, /^[0-9]{6} is your Roster sign-in code$/)
  const code = codeIn(mail)
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: user.email, code: other(code) } }), 401, 'INVALID_CREDENTIALS')
  const signed = await app.inject({ method: 'POST', url: '/auth/tokens', headers: { 'user-agent': 'RosterApp/2 (Android 16)' }, payload: { grant_type: 'email_code', email: user.email, code } })
  t.equal(signed.statusCode, 201, signed.body)
  t.match(signed.json(), { token_type: 'Bearer', user: { id: user.id }, session: { client: 'RosterApp/2 (Android 16)' } })
  const address = (await app.inject({ url: `/users/${user.id}/email`, headers: bearer(signed.json().token) })).json()
  t.equal(address.verified, true, 'the code proved the address')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: user.email, code } }), 401, 'INVALID_CREDENTIALS', 'once')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: user.email } }), 400, 'VALIDATION_FAILED')
  const events = (await app.inject({ url: `/users/${user.id}/events?type=session.created`, headers: bearer(signed.json().token) })).json()
  t.equal(events.items.length, 2, 'a session.created event, as a password login writes')
})

t.test('with EMAIL_CODE_LOGIN=false, no sign-in code is mailed or accepted', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url, EMAIL_CODE_LOGIN: 'false' } })
  const user = await newUser(app)
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: user.email } }), 404, 'NOT_FOUND')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: user.email, code: '123456' } }), 400, 'VALIDATION_FAILED')
  t.equal((await app.db.selectFrom('email_tokens').select('id').where('purpose', '=', 'signin').execute()).length, 0)
})

t.test('deleting oneself needs a fresh sign-in; a refresh does not renew it; admins are not affected', async (t) => {
  const app = await build(t, { env: { REAUTH_MAX_AGE_SECONDS: '600' } })
  const user = await newUser(app)
  await app.db.updateTable('sessions').set({ created_at: Date.now() - 601_000 }).where('user_id', '=', user.id).execute()
  const refreshed = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'refresh_token', refresh_token: user.refreshToken } })
  t.equal(refreshed.statusCode, 201)
  const stale = await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: bearer(refreshed.json().token) })
  assertProblem(t, stale, 401, 'REAUTH_REQUIRED')
  t.match(stale.headers['www-authenticate'], /error="insufficient_user_authentication"/)
  t.match(stale.headers['www-authenticate'], /max_age=600/)
  t.equal((await app.inject({ url: `/users/${user.id}`, headers: bearer(refreshed.json().token) })).statusCode, 200, 'nothing changed')
  const fresh = await session(app, user.email, user.password)
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}`, headers: bearer(fresh.token) })).statusCode, 204, 'a fresh sign-in deletes')
  const other = await newUser(app)
  await app.db.updateTable('sessions').set({ created_at: 0 }).execute()
  const admin = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'root@example.com', password: 'root-password-1' } })
  await app.db.updateTable('sessions').set({ created_at: 0 }).execute()
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${other.id}`, headers: bearer(admin.json().token) })).statusCode, 204, 'an admin deleting another')
})

t.test('one code at a time: a new mail retires the last code; ten wrong codes a day per address, then 429', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url, VERIFICATION_RESEND_SECONDS: '1', LOGIN_MAX_FAILURES: '100000', LOGIN_MAX_FAILURES_PER_CLIENT: '100000' } })
  const user = await newUser(app, { email: 'many.codes@example.com' })
  await smtp.waitFor(user.email)
  const ask = async (n: number) => {
    await new Promise((r) => setTimeout(r, 1100))
    t.equal((await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: user.email } })).statusCode, 202)
    return codeIn(await smtp.waitFor(user.email, n))
  }
  const first = await ask(2)
  const second = await ask(3)
  const signIn = (code: string) => app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: user.email, code } })
  assertProblem(t, await signIn(first === second ? other(first) : first), 401, 'INVALID_CREDENTIALS', 'the former code is dead')
  t.equal((await signIn(second)).statusCode, 201, 'the last one works')

  // Ten wrong codes, over two codes: the eleventh guess is refused unchecked, even the right one (the dead code
  // tried above was one of them).
  let code = await ask(4)
  for (let i = 1; i <= 4; i++) assertProblem(t, await signIn(other(code, i)), 401, 'INVALID_CREDENTIALS')
  code = await ask(5)
  for (let i = 1; i <= 5; i++) assertProblem(t, await signIn(other(code, i)), 401, 'INVALID_CREDENTIALS')
  code = await ask(6)
  assertProblem(t, await signIn(code), 429, 'RATE_LIMITED', 'past ten wrong codes in a day')
  t.equal((await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: user.email, password: user.password } })).statusCode, 201, 'the password still works')

  // An address nobody has answers the same: ten wrong codes, then 429, so trying codes tells no address apart.
  const wrongCode = { '/auth/tokens': [401, 'INVALID_CREDENTIALS'], '/auth/email-verifications': [400, 'INVALID_TOKEN'], '/auth/email-reverts': [400, 'INVALID_TOKEN'] } as const
  for (const [url, extra] of [['/auth/tokens', { grant_type: 'email_code' }], ['/auth/email-verifications', {}], ['/auth/email-reverts', {}]] as const) {
    const attempt = () => app.inject({ method: 'POST', url, payload: { ...extra, email: 'nobody.here@example.com', code: '123456' } })
    const [status, code] = wrongCode[url]
    for (let i = 1; i <= 10; i++) assertProblem(t, await attempt(), status, code, `${url}: wrong code ${i} answered as a known address's`)
    assertProblem(t, await attempt(), 429, 'RATE_LIMITED', `${url}: an unknown address's eleventh wrong code is refused as a known one's`)
  }
})

t.test('a code dies with its address\'s change, and when it expires', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const user = await newUser(app, { email: 'moving@example.com' })
  const code = codeIn(await smtp.waitFor(user.email))
  const put = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email: 'moved@example.com' } })
  t.equal(put.statusCode, 200, put.body)
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: 'moving@example.com', code } }), 400, 'INVALID_TOKEN', 'the former address\'s code is dead')
  const movedCode = codeIn(await smtp.waitFor('moved@example.com'))
  // The code's own lifetime is minutes, however long its token lives.
  await app.db.updateTable('email_tokens').set({ code_expires_at: Date.now() - 1 }).execute()
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: 'moved@example.com', code: movedCode } }), 400, 'INVALID_TOKEN', 'expired')
  const token = tokenIn(await smtp.waitFor('moved@example.com'))
  t.equal((await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { token } })).statusCode, 200, 'its token still works')
})
