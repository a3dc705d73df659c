// Account recovery that holds: the attacks of someone holding a stolen session, played request for request, and
// the owner's revert undoing them.
import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, bearer, build, markVerified, newUser, type TestUser } from '../helpers.js'
import { codeIn, TestSmtp, tokenIn } from '../mail/smtp.js'
import { tokenHash } from '../../src/accounts/secrets.js'
import { callerLookup } from '../../src/auth/caller.js'
import type { Cause } from '../../src/events/record.js'

const FAST = { mail: { pollMs: 50 } }

interface Address { id: number; address: string; primary: boolean; verified: boolean }

async function addresses(app: App, admin: TestUser, userId: number): Promise<Address[]> {
  const res = await app.inject({ method: 'GET', url: `/users/${userId}/emails`, headers: admin.headers })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json<{ items: Address[] }>().items
}

/** Adds an address with the session's headers and verifies it with the code mailed to it, as its reader would. */
async function addVerified(app: App, smtp: TestSmtp, userId: number, headers: Record<string, string>, address: string): Promise<number> {
  const added = await app.inject({ method: 'POST', url: `/users/${userId}/emails`, headers, payload: { address } })
  if (added.statusCode !== 201) throw new Error(added.body)
  const mail = await smtp.waitFor(address)
  const verified = await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { email: address, code: codeIn(mail) } })
  if (verified.statusCode !== 200) throw new Error(verified.body)
  return added.json<{ id: number }>().id
}

/** The owner's account, its verified primary `owner`, taken over through a stolen session: `taker` made primary. */
async function takenOver(app: App, smtp: TestSmtp, owner: string, taker: string) {
  const user = await newUser(app, { email: owner })
  await markVerified(app, owner)
  const stolen = user.headers
  const takerId = await addVerified(app, smtp, user.id, stolen, taker)
  const made = await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${takerId}`, headers: stolen, payload: { primary: true } })
  if (made.statusCode !== 200) throw new Error(made.body)
  // The sign-up's verification mail, then the revert.
  const revertMail = await smtp.waitFor(owner, 2)
  const ownerRow = (await app.db.selectFrom('emails').select('id').where('address_norm', '=', owner).executeTakeFirstOrThrow()).id
  return { user, stolen, takerId, ownerRow, revertMail }
}

const signIn = (app: App, email: string, password: string) =>
  app.inject({ method: 'POST', url: '/auth/tokens', payload: { email, password } })

t.test('the former primary removed and claimed by a second account: 409 EMAIL_TAKEN, and the revert still works', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const { user, stolen, ownerRow, revertMail } = await takenOver(app, smtp, 'owner@example.com', 'taker@example.com')

  // The taker removes the owner's former primary and tries to hand it to an account of its own.
  const removed = await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${ownerRow}`, headers: stolen })
  t.equal(removed.statusCode, 204, removed.body)
  const second = await newUser(app, { email: 'second-account@example.com' })
  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${second.id}/emails`, headers: second.headers, payload: { address: 'owner@example.com' } }),
    409, 'EMAIL_TAKEN', 'held for its user: not added to another account')
  assertProblem(t, await app.inject({ method: 'PUT', url: `/users/${second.id}/email`, headers: second.headers, payload: { email: 'OWNER@example.com' } }),
    409, 'EMAIL_TAKEN', 'nor set as another account\'s primary, in any case')
  assertProblem(t, await app.inject({ method: 'POST', url: '/users', payload: { name: 'Third', email: 'owner@example.com', password: 'password-123' } }),
    409, 'EMAIL_TAKEN', 'nor signed up with')
  assertProblem(t, await app.inject({ method: 'POST', url: '/users', headers: admin.headers, payload: { name: 'By admin', email: 'owner@example.com', password: 'password-123' } }),
    409, 'EMAIL_TAKEN', 'nor created by an admin')
  // And a reset the taker asked for through its own address, pending.
  await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'taker@example.com' } })
  const resetMail = await smtp.waitFor('taker@example.com', 2)

  const res = await app.inject({ method: 'POST', url: '/auth/email-reverts', payload: { email: 'owner@example.com', code: codeIn(revertMail) } })
  t.equal(res.statusCode, 204, res.body)
  const after = await addresses(app, admin, user.id)
  t.same(after.map((a) => [a.address, a.primary, a.verified]).sort(), [['owner@example.com', true, true], ['taker@example.com', false, false]],
    'the former primary is back, verified and primary; the taker\'s address unverified')
  t.equal((await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: stolen })).statusCode, 401, 'the stolen session ended')
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { token: tokenIn(resetMail), password: 'taker-password-9' } }),
    400, 'INVALID_TOKEN', 'the taker\'s pending reset is spent')
  t.equal((await signIn(app, 'owner@example.com', user.password)).statusCode, 201, 'the owner signs in with its own password')
  t.equal((await signIn(app, 'taker@example.com', user.password)).statusCode, 401, 'not through the taker\'s address, now unverified')

  // The hold ends with the revert: the address is the owner's again, and still nobody else's.
  t.equal(await app.db.selectFrom('email_reverts').select('id').execute().then((r) => r.length), 0, 'the revert is spent')
  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${second.id}/emails`, headers: second.headers, payload: { address: 'owner@example.com' } }),
    409, 'EMAIL_TAKEN', 'the owner holds it as its address again')
})

t.test('the primary removed: the address promoted is a change of primary, mailed a revert and held meanwhile', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const user = await newUser(app, { email: 'removed@example.com' })
  await markVerified(app, 'removed@example.com')
  const stolen = user.headers
  await addVerified(app, smtp, user.id, stolen, 'remover@example.com')
  const gone = await app.inject({ method: 'DELETE', url: `/users/${user.id}/email`, headers: stolen })
  t.equal(gone.statusCode, 204, gone.body)
  t.same((await addresses(app, admin, user.id)).map((a) => [a.address, a.primary]), [['remover@example.com', true]])
  const revertMail = await smtp.waitFor('removed@example.com', 2)
  t.match(revertMail.text, 'remover@example.com', 'the mail names the address primary now')
  const other = await newUser(app)
  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${other.id}/emails`, headers: other.headers, payload: { address: 'removed@example.com' } }),
    409, 'EMAIL_TAKEN', 'the removed primary is held for its user')
  t.equal((await app.inject({ method: 'POST', url: '/auth/email-reverts', payload: { token: tokenIn(revertMail) } })).statusCode, 204)
  t.same((await addresses(app, admin, user.id)).filter((a) => a.primary).map((a) => [a.address, a.verified]), [['removed@example.com', true]],
    'the revert re-adds it as the verified primary')
  t.equal((await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: stolen })).statusCode, 401, 'the session that removed it ended')
})

t.test('a change authorised by a session a revert ended on its way is refused: the password and the addresses stay', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const { user, stolen, revertMail } = await takenOver(app, smtp, 'raced@example.com', 'racer@example.com')
  const spare = await addVerified(app, smtp, user.id, stolen, 'racer-spare@example.com')
  // The taker's requests passed authentication; the owner's revert commits before their transactions begin.
  const caller = await callerLookup(app.db)(tokenHash(user.token))
  if (!caller) throw new Error('the stolen session should stand before the revert')
  const cause: Cause = { actor: { type: 'user', id: user.id }, requestId: 'raced', base: '', token: caller.tokenHash }
  t.equal((await app.inject({ method: 'POST', url: '/auth/email-reverts', payload: { token: tokenIn(revertMail) } })).statusCode, 204)

  const refused = async (what: string, change: Promise<unknown>) => {
    const err = await change.then(() => undefined, (e: unknown) => e)
    t.match(err, { code: 'UNAUTHENTICATED' }, `${what}: refused`)
  }
  await refused('a password', app.services.users.changePassword(caller, user.id, 'racer-password-1', user.password, undefined, 'race', cause))
  await refused('a primary', app.services.emails.update(user.id, spare, { primary: true }, undefined, null, cause))
  await refused('an address added', app.services.emails.add(user.id, 'racer-new@example.com', null, cause))
  await refused('the primary replaced', app.services.emails.placePrimary(user.id, 'racer-other@example.com', undefined, null, cause))
  await refused('an address removed', app.services.emails.remove(user.id, 'primary', undefined, cause))
  t.equal((await signIn(app, 'raced@example.com', 'racer-password-1')).statusCode, 401, 'the racing password never signs in')
  const after = (await addresses(app, admin, user.id)).filter((a) => a.primary || a.verified).map((a) => [a.address, a.primary, a.verified])
  t.same(after, [['raced@example.com', true, true]], 'the owner\'s address is the one verified primary, as the revert left it')
})

t.test('a revert undoes what came after the change: addresses added or verified, a password set, codes mailed', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const owner = await newUser(app, { email: 'kept@example.com' })
  await markVerified(app, 'kept@example.com')
  // An address the owner had, verified and unverified, before anything happened.
  await addVerified(app, smtp, owner.id, owner.headers, 'owner-second@example.com')
  await app.inject({ method: 'POST', url: `/users/${owner.id}/emails`, headers: owner.headers, payload: { address: 'owner-pending@example.com' } })
  const { user, stolen, revertMail } = await (async () => {
    const stolen = owner.headers
    const takerId = await addVerified(app, smtp, owner.id, stolen, 'taker@example.com')
    t.equal((await app.inject({ method: 'PUT', url: `/users/${owner.id}/emails/${takerId}`, headers: stolen, payload: { primary: true } })).statusCode, 200)
    return { user: owner, stolen, revertMail: await smtp.waitFor('kept@example.com', 2) }
  })()

  // After the change: another address added and verified, the owner's pending one verified by the taker (who
  // reads none of its mail here, but an admin's mark or a guessed flow stands for it), a password set by a reset
  // through the taker's address, and a sign-in code asked for the new address.
  await new Promise((resolve) => setTimeout(resolve, 5))
  await addVerified(app, smtp, user.id, stolen, 'taker-more@example.com')
  await markVerified(app, 'owner-pending@example.com')
  await app.inject({ method: 'POST', url: '/auth/password-resets', payload: { email: 'taker@example.com' } })
  const reset = await smtp.waitFor('taker@example.com', 2)
  t.equal((await app.inject({ method: 'POST', url: '/auth/password-resets/confirm', payload: { token: tokenIn(reset), password: 'taker-password-9' } })).statusCode, 204)
  const back = await signIn(app, 'taker-more@example.com', 'taker-password-9')
  t.equal(back.statusCode, 201, 'the taker is in with its password')
  const takerHeaders = bearer(back.json<{ token: string }>().token)
  await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: 'taker-more@example.com' } })
  const signInMail = await smtp.waitFor('taker-more@example.com', 2)

  const res = await app.inject({ method: 'POST', url: '/auth/email-reverts', payload: { token: tokenIn(revertMail) } })
  t.equal(res.statusCode, 204, res.body)

  t.same((await addresses(app, admin, user.id)).map((a) => [a.address, a.primary, a.verified]).sort(), [
    ['kept@example.com', true, true],
    ['owner-pending@example.com', false, false],
    ['owner-second@example.com', false, true],
    ['taker@example.com', false, false]
  ], 'added since: removed; verified since: unmarked; what the owner had before: as it was')
  t.equal((await app.inject({ method: 'GET', url: `/users/${user.id}`, headers: takerHeaders })).statusCode, 401, 'the taker\'s new session ended')
  t.equal((await signIn(app, 'kept@example.com', 'taker-password-9')).statusCode, 401, 'the password set since no longer signs in')
  t.equal((await signIn(app, 'kept@example.com', user.password)).statusCode, 401, 'nor the one before it: the owner resets or signs in by code')
  const byCode = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: 'taker-more@example.com', code: codeIn(signInMail) } })
  t.equal(byCode.statusCode, 401, 'the sign-in code mailed to the removed address is spent')

  // The taker asks for a sign-in code to the address it had made primary: nothing is mailed there.
  const before = smtp.to('taker@example.com').length
  await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: 'taker@example.com' } })
  await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: 'taker-more@example.com' } })
  // The owner, at the restored address, gets one and is in.
  const ownerMails = smtp.to('kept@example.com').length
  await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: 'kept@example.com' } })
  const ownerCode = await smtp.waitFor('kept@example.com', ownerMails + 1)
  const ownerIn = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: 'kept@example.com', code: codeIn(ownerCode) } })
  t.equal(ownerIn.statusCode, 201, ownerIn.body)
  t.equal(smtp.to('taker@example.com').length, before, 'no code went to the taker\'s address')
  t.equal(smtp.to('taker-more@example.com').length, 2, 'nor to the removed one')

  const events = await app.inject({ method: 'GET', url: `/events?user_id=${user.id}&limit=200`, headers: admin.headers })
  const items = events.json<{ items: Array<{ type: string; data: { address?: string; reason?: string } }> }>().items
  const revertedAt = items.findIndex((e) => e.type === 'email.primary_changed' && e.data.address === 'kept@example.com')
  const tail = items.slice(revertedAt)
  t.ok(revertedAt > 0, 'the primary changed back')
  t.ok(tail.some((e) => e.type === 'email.removed' && e.data.address === 'taker-more@example.com'), 'email.removed for the address added since')
  t.ok(tail.some((e) => e.type === 'email.changed' && e.data.address === 'owner-pending@example.com'), 'email.changed for the mark taken away')
  t.ok(tail.some((e) => e.type === 'password.changed'), 'password.changed for the password voided')
  t.ok(tail.some((e) => e.type === 'session.ended' && e.data.reason === 'primary_reverted'), 'session.ended')
})

t.test('a revert of a later change does not spend the revert of an earlier one', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const admin = await adminUser(app)
  const { user, stolen, revertMail } = await takenOver(app, smtp, 'first-owner@example.com', 'step-one@example.com')
  // A second change, whose revert goes to the taker's own address, used by the taker to spend the owner's.
  await new Promise((resolve) => setTimeout(resolve, 5))
  const two = await addVerified(app, smtp, user.id, stolen, 'step-two@example.com')
  t.equal((await app.inject({ method: 'PUT', url: `/users/${user.id}/emails/${two}`, headers: stolen, payload: { primary: true } })).statusCode, 200)
  const takerRevert = await smtp.waitFor('step-one@example.com', 2)
  t.equal((await app.inject({ method: 'POST', url: '/auth/email-reverts', payload: { token: tokenIn(takerRevert) } })).statusCode, 204)
  assertProblem(t, await app.inject({ method: 'POST', url: '/auth/email-reverts', payload: { token: tokenIn(takerRevert) } }), 400, 'INVALID_TOKEN', 'used once')

  const res = await app.inject({ method: 'POST', url: '/auth/email-reverts', payload: { token: tokenIn(revertMail) } })
  t.equal(res.statusCode, 204, 'the owner\'s revert of the first change still works')
  t.same((await addresses(app, admin, user.id)).map((a) => [a.address, a.primary, a.verified]).sort(), [
    ['first-owner@example.com', true, true],
    ['step-one@example.com', false, false]
  ])
})

t.test('the hold ends when the revert expires', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const { user, stolen, ownerRow } = await takenOver(app, smtp, 'lapsed@example.com', 'new-primary@example.com')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${ownerRow}`, headers: stolen })).statusCode, 204)
  const other = await newUser(app)
  assertProblem(t, await app.inject({ method: 'POST', url: `/users/${other.id}/emails`, headers: other.headers, payload: { address: 'lapsed@example.com' } }), 409, 'EMAIL_TAKEN')
  await app.db.updateTable('email_reverts').set({ expires_at: Date.now() - 1 }).execute()
  const added = await app.inject({ method: 'POST', url: `/users/${other.id}/emails`, headers: other.headers, payload: { address: 'lapsed@example.com' } })
  t.equal(added.statusCode, 201, 'free again once its revert expired')
})

t.test('the user itself re-adds its former primary while the revert is live', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { ...FAST, env: { SMTP_URL: smtp.url } })
  const { user, ownerRow } = await takenOver(app, smtp, 'mine-again@example.com', 'elsewhere@example.com')
  t.equal((await app.inject({ method: 'DELETE', url: `/users/${user.id}/emails/${ownerRow}`, headers: user.headers })).statusCode, 204)
  const readded = await app.inject({ method: 'POST', url: `/users/${user.id}/emails`, headers: user.headers, payload: { address: 'mine-again@example.com' } })
  t.equal(readded.statusCode, 201, 'a hold keeps others out, not its own user')
})
