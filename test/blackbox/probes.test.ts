import { randomUUID } from 'node:crypto'
import t from 'tap'
import { ADMIN } from '../helpers.js'
import { TestSmtp } from '../mail/smtp.js'
import { assertRecovered, call, signUp, startBuilt } from './service.js'

/**
 * What probing the running service found, each held by a test against the built service over real sockets:
 * mail storms past the resend interval, per-client limits split by how an address is spelled, and a 429 kept as an
 * idempotent answer (the process under faults is in overload.test.ts; login timing, found here too, is held in
 * test/timing/, where nothing else runs beside it).
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('one verification mail per address per resend interval, whatever the path; every mail-causing request counts per client', async (t) => {
  const smtp = await TestSmtp.start(t)
  // Behind a proxy on loopback: requests without X-Forwarded-For are one client (127.0.0.1), the others their own.
  const service = await startBuilt(t, { SMTP_URL: smtp.url, MAIL_MAX_PER_CLIENT: '25', TRUST_PROXY: 'loopback' })
  const baseline = service.usage()
  const me = await signUp(service, 'storm@example.com')

  // Replacing the address back and forth between the victim's and one's own, ten times in a few seconds.
  for (let i = 0; i < 10; i++) {
    const email = i % 2 === 0 ? 'victim@example.net' : 'storm@example.com'
    t.equal((await call(service, 'PUT', `/users/${me.id}/email`, { headers: me.auth, body: { email } })).status, 200, `replace #${i + 1}`)
  }
  // Adding and removing another victim's address ten times.
  for (let i = 0; i < 10; i++) {
    const added = await call(service, 'POST', `/users/${me.id}/emails`, { headers: me.auth, body: { address: 'victim2@example.net' } })
    t.equal(added.status, 201, `add #${i + 1}`)
    t.equal((await call(service, 'DELETE', `/users/${me.id}/emails/${String(added.body.id)}`, { headers: me.auth })).status, 204)
  }
  // A change refused after it wrote its mail (the new address cannot be primary unverified) is rolled back, mail
  // and all, and does not hold back the mail of the same change made right.
  const spare = await call(service, 'POST', `/users/${me.id}/emails`, { headers: me.auth, body: { address: 'spare@example.org' } })
  t.equal(spare.status, 201)
  const refused = await call(service, 'PUT', `/users/${me.id}/emails/${String(spare.body.id)}`, { headers: me.auth, body: { address: 'rolled@example.org', primary: true } })
  t.equal(refused.status, 409, 'an unverified address cannot become primary')
  t.equal((await call(service, 'PUT', `/users/${me.id}/emails/${String(spare.body.id)}`, { headers: me.auth, body: { address: 'rolled@example.org' } })).status, 200)
  await smtp.waitFor('rolled@example.org')
  t.pass('the change made right is mailed')

  // Sign-up 1, replaces 10, adds 11, the two changes 2: 24 of the client's 25. One more passes, the next is
  // refused and changes nothing.
  const more: number[] = []
  for (let i = 0; i < 2; i++) more.push((await call(service, 'POST', `/users/${me.id}/emails`, { headers: me.auth, body: { address: `more${i}@example.org` } })).status)
  t.same(more, [201, 429], 'every mail-causing request counts against MAIL_MAX_PER_CLIENT')
  const list = await call(service, 'GET', `/users/${me.id}/emails`, { headers: me.auth })
  t.notOk((list.body.items as Array<{ address: string }>).some((e) => e.address === 'more1@example.org'), 'the refused request added nothing')

  await smtp.waitFor('more0@example.org')
  await sleep(1_000) // any mail still on its way
  t.equal(smtp.to('victim@example.net').length, 1, 'the first victim got one mail')
  t.equal(smtp.to('victim2@example.net').length, 1, 'the second victim got one mail')
  t.equal(smtp.to('storm@example.com').length, 1, 'the user\'s own address one (its sign-up\'s)')

  // The interval is the user's own: the address's owner, signing up meanwhile, gets its verification mail.
  const owner = await call(service, 'POST', '/users', { headers: { 'x-forwarded-for': '198.51.100.7' }, body: { name: 'Owner', email: 'victim2@example.net', password: 'password-123' } })
  t.equal(owner.status, 201, 'the owner of the second address signs up')
  await smtp.waitFor('victim2@example.net', 2)
  t.pass('and is mailed, within the interval the other user started')
  await assertRecovered(t, service, baseline, 'after the mail storm')
})

t.test('every spelling of one client address, and every address of one IPv6 /64, is one client', async (t) => {
  const service = await startBuilt(t, { TRUST_PROXY: 'loopback', LOGIN_MAX_FAILURES: '5', RATE_LIMIT_MAX: '1000' })
  await signUp(service, 'target@example.com', { 'x-forwarded-for': '198.51.100.1' })
  const guess = (forwarded: string) => call(service, 'POST', '/auth/tokens', {
    headers: { 'x-forwarded-for': forwarded }, body: { email: 'target@example.com', password: 'wrong-password' }
  })
  const spellings = ['2001:db8::1', '2001:DB8::1', '2001:db8:0:0:0:0:0:1', '2001:0db8::0001', '[2001:db8::1]', '2001:db8::2', '2001:db8::ffff:1']
  const statuses: number[] = []
  for (const spelling of spellings) statuses.push((await guess(spelling)).status)
  t.same(statuses, [401, 401, 401, 401, 401, 429, 429], 'five guesses in all, then 429, across spellings and one /64')
  t.equal((await guess('2001:db8:1::1')).status, 401, 'another /64 is another client')

  const mapped = ['::ffff:203.0.113.9', '203.0.113.9', '::FFFF:203.0.113.9', '203.0.113.9', '::ffff:cb00:7109', '203.0.113.9']
  const v4: number[] = []
  for (const spelling of mapped) v4.push((await guess(spelling)).status)
  t.same(v4, [401, 401, 401, 401, 401, 429], 'an IPv4-mapped IPv6 address is its IPv4 address')

  // The general rate limit's window: one for all the spellings.
  const remaining = async (forwarded: string) => {
    const res = await fetch(`${service.base}/openapi.json`, { headers: { 'x-forwarded-for': forwarded } })
    await res.arrayBuffer()
    return Number(/r=(\d+)/.exec(res.headers.get('ratelimit') ?? '')?.[1])
  }
  const first = await remaining('2001:db8:5::1')
  t.equal(await remaining('2001:DB8:5:0::7'), first - 1, 'the rate limit counts both spellings in one window')
})

t.test('a 429 is not kept as the answer to its Idempotency-Key: the retry it invites runs', async (t) => {
  const service = await startBuilt(t, { VERIFICATION_RESEND_SECONDS: '3' })
  const reset = (key: string) => call(service, 'POST', '/auth/password-resets', { headers: { 'idempotency-key': key }, body: { email: ADMIN.email } })
  t.equal((await reset(randomUUID())).status, 202)
  const key = randomUUID()
  const refused = await reset(key)
  t.equal(refused.status, 429, 'asked again within the interval')
  const wait = Number(refused.headers.get('retry-after'))
  t.ok(wait >= 1, `Retry-After: ${wait}`)
  await sleep(wait * 1000 + 100)
  const retried = await reset(key)
  t.equal(retried.status, 202, 'the retry ran')
  t.equal(retried.headers.get('idempotent-replayed'), null, 'and was not a replay')
  const replayed = await reset(key)
  t.equal(replayed.status, 202)
  t.equal(replayed.headers.get('idempotent-replayed'), 'true', 'its 202 is the kept answer from then on')
})
