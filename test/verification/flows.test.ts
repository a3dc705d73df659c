import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, bearer, build, form, login, newUser, type TestUser } from '../helpers.js'
import { TestSmtp, tokenIn } from '../mail/smtp.js'

/** The app over a real SMTP server in this process, delivering at once. */
async function mailing(t: Test, env: Record<string, string> = {}) {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { env: { SMTP_URL: smtp.url, MAIL_FROM: 'Roster <no-reply@roster.test>', ...env }, mail: { pollMs: 50 } })
  return { app, smtp }
}

const emailsOf = async (app: App, user: TestUser) =>
  (await app.inject({ url: `/users/${user.id}/emails`, headers: user.headers })).json().items as Array<{ id: number; address: string; primary: boolean; verified: boolean; verified_at: string | null }>

const verify = (app: App, token: string) => app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { token } })

t.test('sign-up mails a token; posting it back verifies the address, once', async (t) => {
  const { app, smtp } = await mailing(t, { APP_LINK_TEMPLATE: 'roster-app://verify?token={token}&for={purpose}' })
  const user = await newUser(app, { email: 'Ada@Example.com' })
  const [before] = await emailsOf(app, user)
  t.match(before, { address: 'Ada@Example.com', primary: true, verified: false, verified_at: null })

  const mail = await smtp.waitFor('ada@example.com')
  t.equal(mail.from, 'no-reply@roster.test', 'from MAIL_FROM')
  t.match(mail.subject, /Roster/, 'the product is named')
  t.match(mail.text, /Ada@Example\.com/, 'the address is named')
  t.match(mail.text, /expires at \d{4}-\d\d-\d\dT.*\(in 24 hours\)/, 'when the token expires')
  const token = tokenIn(mail)
  t.match(mail.text, `roster-app://verify?token=${token}&for=verify`, 'the link from APP_LINK_TEMPLATE')
  t.match(mail.html, `<code>${token}</code>`, 'an HTML body with the token')

  const res = await verify(app, token)
  t.equal(res.statusCode, 200)
  t.match(res.json(), { id: before!.id, address: 'Ada@Example.com', verified: true, verified_at: /^\d{4}-/ })
  t.ok(res.headers.etag, 'the address with its new ETag')
  const [after] = await emailsOf(app, user)
  t.equal(after!.verified, true, 'stored')

  assertProblem(t, await verify(app, token), 400, 'INVALID_TOKEN', 'single use')
  for (const bad of ['nope', 'x'.repeat(43), token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A')]) {
    assertProblem(t, await verify(app, bad), 400, 'INVALID_TOKEN', `bad token ${bad.slice(0, 8)}…`)
  }
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: {} }), 400, 'VALIDATION_FAILED', 'no token')
  const viaGet = await app.inject({ url: `/auth/email-verifications?token=${token}` })
  t.not(viaGet.statusCode, 200, 'no GET verifies anything')

  const stored = await app.db.selectFrom('email_tokens').select(['token_hash']).execute()
  t.notOk(stored.some((r) => r.token_hash.includes(token)), 'only a hash of a token is stored')
  t.ok(stored.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash)))

  const raced = await newUser(app)
  const racedToken = tokenIn(await smtp.waitFor(raced.email))
  const both = await Promise.all([verify(app, racedToken), verify(app, racedToken), verify(app, racedToken)])
  t.same(both.map((r) => r.statusCode).sort(), [200, 400, 400], 'the same token sent three times at once verifies once')

  const viaForm = await newUser(app)
  const formToken = tokenIn(await smtp.waitFor(viaForm.email))
  const formRes = await app.inject({ method: 'POST', url: '/auth/email-verifications', ...form({ token: formToken }) })
  t.equal(formRes.statusCode, 200, 'a urlencoded form works too')
})

t.test('an added address is mailed; only once verified may it become primary, and the former primary is told', async (t) => {
  const { app, smtp } = await mailing(t)
  const user = await newUser(app, { email: 'first@example.com', password: 'pass-word-1' })
  // Verified: a former primary never verified is mailed nothing (test/verification/reverts.test.ts).
  t.equal((await verify(app, tokenIn(await smtp.waitFor('first@example.com')))).statusCode, 200)
  const added = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'second@example.com' } })
  t.equal(added.statusCode, 201)
  t.match(added.json(), { primary: false, verified: false, verified_at: null })
  const id = added.json().id as number

  const login2 = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'second@example.com', password: 'pass-word-1' } })
  assertProblem(t, login2, 401, 'INVALID_CREDENTIALS', 'an unverified secondary address does not log in')

  const early = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${id}`, headers: user.headers, payload: { primary: true } })
  assertProblem(t, early, 409, 'EMAIL_UNVERIFIED', 'unverified cannot become primary')

  t.equal((await verify(app, tokenIn(await smtp.waitFor('second@example.com')))).statusCode, 200)
  t.ok(await login(app, 'second@example.com', 'pass-word-1'), 'a verified secondary address logs in')

  const primaryForm = form({ primary: 'true' })
  const viaForm = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${id}`, payload: primaryForm.payload, headers: { ...user.headers, ...primaryForm.headers } })
  t.equal(viaForm.statusCode, 200, 'primary=true as a form field')
  t.match(viaForm.json(), { id, primary: true, verified: true })
  const self = (await app.inject({ url: `/users/${user.id}`, headers: user.headers })).json()
  t.equal(self.email, 'second@example.com', 'the user shows its new primary')
  const emails = await emailsOf(app, user)
  t.same(emails.map((e) => [e.address, e.primary]), [['first@example.com', false], ['second@example.com', true]], 'the former primary stays, secondary')

  const notice = await smtp.waitFor('first@example.com', 2)
  t.match(notice.subject, /undo the change of your primary address/)
  t.match(notice.text, /second@example\.com/)

  const unset = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${id}`, headers: user.headers, payload: { primary: false } })
  assertProblem(t, unset, 400, 'VALIDATION_FAILED', 'the primary cannot be unset without another')
  assertProblem(t, await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${id}`, headers: user.headers, payload: {} }), 400, 'VALIDATION_FAILED', 'an empty change')
})

t.test('a replaced address is unverified again and mailed; old tokens die with the address they were sent to', async (t) => {
  const { app, smtp } = await mailing(t)
  const user = await newUser(app, { email: 'keep@example.com' })
  t.equal((await verify(app, tokenIn(await smtp.waitFor('keep@example.com')))).statusCode, 200)
  const [primary] = await emailsOf(app, user)

  const recased = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email: 'Keep@Example.com' } })
  t.match(recased.json(), { address: 'Keep@Example.com', verified: true }, 'other letter case is the same mailbox: still verified')

  const added = (await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'old@example.com' } })).json()
  const oldToken = tokenIn(await smtp.waitFor('old@example.com'))
  const moved = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${added.id}`, headers: user.headers, payload: { address: 'new@example.com' } })
  t.match(moved.json(), { id: added.id, address: 'new@example.com', verified: false })
  assertProblem(t, await verify(app, oldToken), 400, 'INVALID_TOKEN', 'the token of the former address is dead')
  t.equal((await verify(app, tokenIn(await smtp.waitFor('new@example.com')))).statusCode, 200, 'the new address has its own')

  const replaced = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email: 'moved@example.com' } })
  t.match(replaced.json(), { id: primary!.id, address: 'moved@example.com', primary: true, verified: false }, 'a replaced primary stays primary, unverified')
  await smtp.waitFor('moved@example.com')

  const gone = (await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'gone@example.com' } })).json()
  const goneToken = tokenIn(await smtp.waitFor('gone@example.com'))
  await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${gone.id}`, headers: user.headers })
  assertProblem(t, await verify(app, goneToken), 400, 'INVALID_TOKEN', 'the token of a removed address is dead')
})

t.test('resending: 202 with where and until when, 429 within the resend interval, 409 once verified', async (t) => {
  const { app, smtp } = await mailing(t, { VERIFICATION_RESEND_SECONDS: '1' })
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'resend@example.com' })
  const [email] = await emailsOf(app, user)
  const url = `/users/${user.id}/emails/${email!.id}/verification`
  const first = await smtp.waitFor('resend@example.com')

  const soon = await app.inject({ method: 'POST', url, headers: user.headers })
  assertProblem(t, soon, 429, 'RATE_LIMITED', 'the sign-up mail counts')
  t.ok(Number(soon.headers['retry-after']) >= 1, 'Retry-After')

  await new Promise((r) => setTimeout(r, 1100))
  const again = await app.inject({ method: 'POST', url, headers: admin.headers })
  t.equal(again.statusCode, 202, 'an admin may resend')
  t.match(again.json(), { sent_to: 'resend@example.com', expires_at: /^\d{4}-/ })
  const second = await smtp.waitFor('resend@example.com', 2)
  t.not(tokenIn(second), tokenIn(first), 'a new token')
  t.equal((await verify(app, tokenIn(first))).statusCode, 200, 'the earlier token still works until it expires')
  assertProblem(t, await verify(app, tokenIn(second)), 400, 'INVALID_TOKEN', 'verifying spends every verification token of the address')

  await new Promise((r) => setTimeout(r, 1100))
  assertProblem(t, await app.inject({ method: 'POST', url, headers: user.headers }), 409, 'EMAIL_ALREADY_VERIFIED')
  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${user.id}/emails/999999/verification`, headers: user.headers }), 404, 'EMAIL_NOT_FOUND')
  t.equal(smtp.to('resend@example.com').length, 2, 'no more mail than answered 202')
})

t.test('an expired verification token is INVALID_TOKEN', async (t) => {
  const { app, smtp } = await mailing(t, { VERIFICATION_TTL_SECONDS: '1' })
  const user = await newUser(app)
  const token = tokenIn(await smtp.waitFor(user.email))
  await new Promise((r) => setTimeout(r, 1100))
  assertProblem(t, await verify(app, token), 400, 'INVALID_TOKEN')
})

t.test('a change that fails writes no mail: the outbox is written in its transaction', async (t) => {
  const { app, smtp } = await mailing(t, { MAX_EMAILS_PER_USER: '2' })
  const user = await newUser(app, { email: 'owner@example.com' })
  await smtp.waitFor('owner@example.com')
  const outbox = async () => Number((await app.db.selectFrom('outbox').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  const before = await outbox()
  const taken = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Dup', email: 'OWNER@example.com', password: 'password-123' } })
  assertProblem(t, taken, 409, 'EMAIL_TAKEN', 'sign-up with a taken address')
  await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'two@example.com' } })
  const limit = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'three@example.com' } })
  assertProblem(t, limit, 409, 'EMAIL_LIMIT')
  const other = await newUser(app)
  const clash = await app.inject({ method: 'PUT', url: `/users/${user.id}/email`, headers: user.headers, payload: { email: other.email } })
  assertProblem(t, clash, 409, 'EMAIL_TAKEN', 'replacing with a taken address')
  t.equal(await outbox(), before + 2, 'only the two changes that committed wrote mail')
  await smtp.waitFor('two@example.com')
  await app.outbox.deliverDue()
  t.equal(smtp.to('three@example.com').length + smtp.to('owner@example.com').length, 1, 'nothing sent for what failed')
})

t.test('password recovery: a mailed token sets the password, verifies the address and ends every session', async (t) => {
  const { app, smtp } = await mailing(t, { APP_LINK_TEMPLATE: 'https://app.example.com/{purpose}?token={token}' })
  const user = await newUser(app, { email: 'forgot@example.com', password: 'old-password-1' })
  const second = await login(app, 'forgot@example.com', 'old-password-1')
  const signup = await smtp.waitFor('forgot@example.com')

  const asked = await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'FORGOT@example.com' } })
  t.equal(asked.statusCode, 202)
  t.equal(asked.headers['cache-control'], 'no-store')
  const mail = await smtp.waitFor('forgot@example.com', 2)
  t.not(mail.subject, signup.subject)
  t.match(mail.subject, /reset your password/)
  t.match(mail.text, /expires at .*\(in 60 minutes\)/)
  const token = tokenIn(mail)
  t.match(mail.text, `https://app.example.com/reset?token=${token}`)

  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { token, password: 'short' } }), 400, 'VALIDATION_FAILED', 'the new password is checked')
  const done = await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { token, password: 'new-password-2' } })
  t.equal(done.statusCode, 204)
  for (const old of [user.token, second]) {
    t.equal((await app.inject({ url: `/users/${user.id}`, headers: bearer(old) })).statusCode, 401, 'every session ended')
  }
  const refresh = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'refresh_token', refresh_token: user.refreshToken } })
  assertProblem(t, refresh, 401, 'INVALID_GRANT', 'refresh tokens too')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/tokens', payload: { email: 'forgot@example.com', password: 'old-password-1' } }), 401, 'INVALID_CREDENTIALS', 'the old password is gone')
  const fresh = await login(app, 'forgot@example.com', 'new-password-2')
  const [email] = (await app.inject({ url: `/users/${user.id}/emails`, headers: bearer(fresh) })).json().items
  t.equal(email.verified, true, 'reading the reset mail verified the address')
  assertProblem(t, await verify(app, tokenIn(signup)), 400, 'INVALID_TOKEN', 'and spent its verification tokens')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { token, password: 'third-password-3' } }), 400, 'INVALID_TOKEN', 'single use')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { token: 'x'.repeat(43), password: 'third-password-3' } }), 400, 'INVALID_TOKEN', 'unknown')
})

t.test('a reset request answers alike for every address, and mails only a primary or verified one', async (t) => {
  const { app, smtp } = await mailing(t)
  const user = await newUser(app, { email: 'someone@example.com' })
  await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'unverified@example.com' } })
  await smtp.waitFor('unverified@example.com')
  const answers = []
  for (const email of ['someone@example.com', 'nobody@example.com', 'unverified@example.com']) {
    const res = await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email } })
    t.equal(res.statusCode, 202, email)
    answers.push(res.json())
  }
  t.same(answers[1], answers[0], 'an unknown address: the same body')
  t.same(answers[2], answers[0], 'an unverified secondary address: the same body')
  await smtp.waitFor('someone@example.com', 2)
  await app.outbox.deliverDue()
  t.equal(smtp.to('nobody@example.com').length, 0, 'nothing to an unknown address')
  t.equal(smtp.to('unverified@example.com').length, 1, 'nothing more to an unverified secondary address')

  const again = await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'nobody@example.com' } })
  assertProblem(t, again, 429, 'RATE_LIMITED', 'one request per address per resend interval, whether or not it exists')
  const againKnown = await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'someone@example.com' } })
  t.same([againKnown.statusCode, againKnown.json().code], [again.statusCode, again.json().code], 'the same refusal for a known address')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'not an address' } }), 400, 'VALIDATION_FAILED')
})

t.test('sign-ups, reset requests and resends are limited per client; failed reset tokens count against the client', async (t) => {
  const { app } = await mailing(t, { MAIL_MAX_PER_CLIENT: '3', LOGIN_MAX_FAILURES_PER_CLIENT: '3' })
  // The sign-up mails a verification: the first of the client's three.
  const user = await newUser(app)
  for (let i = 0; i < 2; i++) {
    t.equal((await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: `a${i}@example.com` } })).statusCode, 202)
  }
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'a9@example.com' } }), 429, 'RATE_LIMITED', 'past the per-client limit')
  const other = await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'a9@example.com' }, remoteAddress: '10.0.0.9' })
  t.equal(other.statusCode, 202, 'another client is not limited')
  const signup = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Late', email: 'late@example.com', password: 'password-123' } })
  assertProblem(t, signup, 429, 'RATE_LIMITED', 'a sign-up past the limit is refused')
  t.equal((await app.inject({ url: '/users/email/late@example.com', headers: (await adminUser(app)).headers })).statusCode, 404, 'and creates nothing')
  const [email] = await emailsOf(app, user)
  const resend = await app.inject({ method: 'POST', url: `/users/${user.id}/emails/${email!.id}/verification`, headers: user.headers })
  assertProblem(t, resend, 429, 'RATE_LIMITED', 'resends share the per-client limit')
  t.match(resend.json().detail, /requests for mail from this client/)

  const confirm = (token: string) => app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { token, password: 'whatever-123' } })
  for (let i = 0; i < 3; i++) assertProblem(t, await confirm('y'.repeat(43)), 400, 'INVALID_TOKEN')
  assertProblem(t, await confirm('y'.repeat(43)), 429, 'RATE_LIMITED', 'guessing tokens is throttled per client')
})

t.test('an unverified claim stops blocking the address after UNVERIFIED_CLAIM_SECONDS; a verified one never does', async (t) => {
  // Each address's verification mails are a second apart at least: the waits below let the next one through.
  const { app, smtp } = await mailing(t, { UNVERIFIED_CLAIM_SECONDS: '1', VERIFICATION_RESEND_SECONDS: '1' })
  const squatter = await newUser(app, { email: 'squatter@example.com' })
  const owner = await newUser(app, { email: 'owner@example.com' })
  await app.inject({ method: 'POST', url: `/users/${squatter.id}/emails`, headers: squatter.headers, payload: { address: 'Claimed@Example.com' } })
  const early = await app.inject({ method: 'POST', url: `/users/${owner.id}/emails`, headers: owner.headers, payload: { address: 'claimed@example.com' } })
  assertProblem(t, early, 409, 'EMAIL_TAKEN', 'within the claim period')

  await new Promise((r) => setTimeout(r, 1200))
  const taken = await app.inject({ method: 'POST', url: `/users/${owner.id}/emails`, headers: owner.headers, payload: { address: 'claimed@example.com' } })
  t.equal(taken.statusCode, 201, 'a stale unverified claim is given up')
  t.same((await emailsOf(app, squatter)).map((e) => e.address), ['squatter@example.com'], 'the former holder lost it')
  t.equal((await verify(app, tokenIn(await smtp.waitFor('claimed@example.com', 2)))).statusCode, 200, 'and the real owner proves it')

  // A stale claim that was its holder's primary: the holder's next address becomes primary.
  const lone = await newUser(app, { email: 'lone@example.com' })
  t.equal((await verify(app, tokenIn(await smtp.waitFor(owner.email)))).statusCode, 200)
  await new Promise((r) => setTimeout(r, 1200))
  const verifiedClaim = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Late', email: owner.email, password: 'password-123' } })
  assertProblem(t, verifiedClaim, 409, 'EMAIL_TAKEN', 'a verified address is never given up')
  const signup = await app.inject({ method: 'POST', url: '/users', payload: { name: 'Real Lone', email: 'LONE@example.com', password: 'password-123' } })
  t.equal(signup.statusCode, 201, 'sign-up takes a stale primary claim')
  const loneSelf = (await app.inject({ url: `/users/${lone.id}`, headers: lone.headers })).json()
  t.equal(loneSelf.email, null, 'its former holder has no address left')
})
