import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { App } from '../../src/app.js'
import { MailKind } from '../../src/mail/kind.js'
import { Deliverer, retryDelay } from '../../src/outbox/deliverer.js'
import { render, timeLeft } from '../../src/mail/templates.js'
import { build, newUser, sharedDatabase, tempDir } from '../helpers.js'
import { TestSmtp, tokenIn } from './smtp.js'

const FAST = { pollMs: 50, retryBaseMs: 100, retryMaxMs: 400 }

const outbox = (app: App) => app.db.selectFrom('outbox').select(['id', 'recipient', 'state', 'attempts', 'data', 'last_error']).orderBy('id').execute()

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

t.test('retry delays double from the base, stay under the cap, and are jittered', async (t) => {
  t.same([1, 2, 3, 4].map((n) => retryDelay(n, 1000, 5000, () => 0.5)), [1000, 2000, 4000, 5000])
  t.equal(retryDelay(60, 1000, 300_000, () => 0.5), 300_000, 'no overflow after many attempts')
  t.equal(retryDelay(1, 1000, 5000, () => 0), 800)
  t.equal(retryDelay(1, 1000, 5000, () => 1), 1200)
  t.equal(timeLeft(Date.now() + 86_400_000, Date.now()), 'in 24 hours')
  t.equal(timeLeft(Date.now() + 3_600_000, Date.now()), 'in 60 minutes')
  t.equal(timeLeft(Date.now() + 7 * 86_400_000, Date.now()), 'in 7 days')
  const html = render({ kind: 'primary-changed', to: 'a@b.c', data: { address: '<a>@b.c', primary: 'x"@b.c' } }).html
  t.notMatch(html, '<a>@', 'addresses are escaped in HTML')
  t.match(html, '&lt;a&gt;@b.c')
})

t.test('an SMTP outage delays mail and loses none; none is sent twice', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { env: { SMTP_URL: smtp.url }, mail: FAST })
  await smtp.stop()
  const users = []
  for (let i = 0; i < 6; i++) users.push(await newUser(app, { email: `outage${i}@example.com` }))
  await until('failed attempts while the server is away', async () => (await outbox(app)).every((m) => m.attempts >= 2))
  t.equal(smtp.received.length, 0, 'nothing delivered while away')
  const during = await outbox(app)
  t.ok(during.every((m) => m.state === 'pending'), 'every mail still pending')
  t.ok(during.every((m) => m.last_error), 'the failure is recorded')

  await smtp.listen()
  for (const user of users) await smtp.waitFor(user.email)
  await new Promise((r) => setTimeout(r, 500))
  await app.outbox.deliverDue()
  for (const user of users) t.equal(smtp.to(user.email).length, 1, `${user.email}: delivered once`)
  const after = await outbox(app)
  t.ok(after.every((m) => m.state === 'sent'), 'every mail marked sent')
  t.ok(after.every((m) => m.data === '{}'), 'no token is kept once its mail is sent')
})

t.test('a 4xx answer is retried; a 5xx answer is given up and logged', async (t) => {
  const smtp = await TestSmtp.start(t)
  const lines: string[] = []
  const app = await build(t, { env: { SMTP_URL: smtp.url, LOG_LEVEL: 'warn' }, mail: FAST, logStream: { write: (line) => void lines.push(line) } })
  let busy = 2
  smtp.verdict = (to) => {
    if (to === 'busy@example.com' && busy-- > 0) return { code: 451, message: 'Try again later' }
    if (to === 'bounce@example.com') return { code: 550, message: 'No such mailbox' }
    return 'accept'
  }
  await newUser(app, { email: 'busy@example.com' })
  await newUser(app, { email: 'bounce@example.com' })
  const busyMail = await smtp.waitFor('busy@example.com')
  t.ok(tokenIn(busyMail), 'delivered after two 451 answers')
  await until('the bounce given up and the retried mail marked sent', async () => {
    const rows = await outbox(app)
    return rows.some((m) => m.recipient === 'bounce@example.com' && m.state === 'failed') && rows.some((m) => m.recipient === 'busy@example.com' && m.state === 'sent')
  })
  const rows = await outbox(app)
  t.match(rows.find((m) => m.recipient === 'busy@example.com'), { state: 'sent', attempts: 3 }, 'two failed attempts, then the one that went')
  t.match(rows.find((m) => m.recipient === 'bounce@example.com'), { state: 'failed', attempts: 1, data: '{}', last_error: /550/ }, 'no retry after a 5xx')
  t.equal(smtp.to('bounce@example.com').length, 0)
  const logged = lines.map((l) => JSON.parse(l) as { level: number; msg: string; permanent?: boolean })
  t.ok(logged.some((l) => l.level === 50 && l.msg === 'mail: given up' && l.permanent === true), 'the give-up is logged as an error')
  t.ok(logged.some((l) => l.level === 40 && l.msg === 'mail: not delivered; will retry'), 'retries are logged as warnings')
})

t.test('several instances deliver one outbox: each mail is sent once', async (t) => {
  const smtp = await TestSmtp.start(t)
  const url = await sharedDatabase(t)
  const env = { SMTP_URL: smtp.url }
  const a = await build(t, { url, env, mail: { ...FAST, batch: 3 } })
  const b = await build(t, { url, env, mail: { ...FAST, batch: 3 } })
  // Both deliverers are running; mail is written through both instances.
  const emails: string[] = []
  for (let i = 0; i < 16; i++) emails.push((await newUser(i % 2 ? a : b, { email: `many${i}@example.com` })).email)
  for (const email of emails) await smtp.waitFor(email)
  await new Promise((r) => setTimeout(r, 500))
  await Promise.all([a.outbox.deliverDue(), b.outbox.deliverDue()])
  t.equal(smtp.received.filter((m) => m.to.startsWith('many')).length, 16, 'sixteen mails, sixteen deliveries')
  for (const email of emails) t.equal(smtp.to(email).length, 1, `${email} once`)
})

t.test('without SMTP_URL each mail goes to the log, token included: the flow works from the log alone', async (t) => {
  const lines: string[] = []
  const app = await build(t, { env: { LOG_LEVEL: 'info' }, mail: FAST, logStream: { write: (line) => void lines.push(line) } })
  const user = await newUser(app, { email: 'logged@example.com' })
  const mailLine = async () => lines.map((l) => JSON.parse(l)).find((l) => l.mail?.to === 'logged@example.com')
  await until('the mail in the log', async () => (await mailLine()) !== undefined)
  const entry = await mailLine()
  t.match(entry, { level: 30, mail: { subject: /confirm your address/ } })
  const res = await app.inject({ method: 'POST', url: '/auth/email-verifications', payload: { token: tokenIn(entry.mail) } })
  t.equal(res.statusCode, 200)
  t.equal(res.json().verified, true)
  t.ok(user)
})

t.test('a deliverer stopping mid-batch gives back what it claimed and did not reach', async (t) => {
  const app = await build(t)
  await app.outbox.stop()
  for (let i = 0; i < 3; i++) await newUser(app, { email: `stopping${i}@example.com` })
  let release: () => void = () => {}
  const sent: string[] = []
  const transport = {
    name: 'held',
    send: async (mail: { to: string }) => {
      sent.push(mail.to)
      await new Promise<void>((resolve) => { release = resolve })
    },
    close() {}
  }
  const log = { info() {}, warn() {}, error() {} }
  // One lane: the first mail is in hand while the two others wait in it.
  const deliverer = new Deliverer(app.db, log, { pollMs: 60_000, lanes: 1 })
  deliverer.add(new MailKind(transport, { batch: 10 }))
  deliverer.start()
  await until('the first send to start', async () => sent.length === 1)
  const stopped = deliverer.stop()
  release()
  await stopped
  const rows = await app.db.selectFrom('outbox').select(['recipient', 'state', 'claim', 'next_attempt_at']).where('recipient', 'like', 'stopping%').orderBy('id').execute()
  t.equal(rows.filter((r) => r.state === 'sent').length, 1, 'the mail in hand was finished')
  const rest = rows.filter((r) => r.state === 'pending')
  t.equal(rest.length, 2)
  t.ok(rest.every((r) => r.claim === null && r.next_attempt_at <= Date.now()), 'the others are due again at once, for any instance')
})

/** A self-signed certificate for 127.0.0.1, made with openssl for this test only. */
function selfSigned(t: Test): { key: string; cert: string; certFile: string } {
  const dir = tempDir(t, 'roster-tls-')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' })
  return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8'), certFile: join(dir, 'cert.pem') }
}

t.test('SMTP over TLS: a relay whose certificate is not trusted is said so and retried; with SMTP_CA_FILE it is delivered', async (t) => {
  const tls = selfSigned(t)
  const smtp = await TestSmtp.start(t, tls)
  t.match(smtp.url, /^smtps:\/\//)

  const untrusted = await build(t, { env: { SMTP_URL: smtp.url }, mail: FAST })
  await newUser(untrusted, { email: 'tls.untrusted@example.com' })
  await until('a failed attempt', async () => (await outbox(untrusted)).some((m) => m.attempts >= 1))
  const [row] = await outbox(untrusted)
  t.equal(row?.state, 'pending', 'kept, to be retried once the operator acts')
  t.match(row?.last_error, /^TLS: the SMTP server's certificate is not trusted .*set SMTP_CA_FILE/, 'the failure says what to do')
  t.equal(smtp.received.length, 0, 'nothing went over an untrusted connection')

  const trusted = await build(t, { env: { SMTP_URL: smtp.url, SMTP_CA_FILE: tls.certFile }, mail: FAST })
  const user = await newUser(trusted, { email: 'tls.trusted@example.com' })
  const mail = await smtp.waitFor(user.email)
  t.match(mail.text, /Your token: /, 'delivered over TLS to a relay trusted through SMTP_CA_FILE')
})
