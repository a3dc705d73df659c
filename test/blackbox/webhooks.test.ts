import t from 'tap'
import { ADMIN } from '../helpers.js'
import { Receiver, until } from '../webhooks/receiver.js'
import { call, signUp, startBuilt } from './service.js'

/**
 * Webhooks from the built service as `npm start` runs it, over real sockets, for a while: a receiver that verifies
 * every signature goes down and comes back, another hangs past the timeout and one answers a huge body; every event
 * arrives, and the same process is alive and holds no more descriptors than it started with.
 */
t.test('the built service delivers every event through a receiver outage, a hung receiver and a huge answer; it lives on', async (t) => {
  const receiver = await Receiver.start(t)
  const hung = await Receiver.start(t)
  const service = await startBuilt(t, {
    WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_BASE_SECONDS: '1', WEBHOOK_RETRY_MAX_SECONDS: '2'
  })
  const login = await call(service, 'POST', '/auth/tokens', { body: ADMIN })
  const admin = { authorization: `Bearer ${String(login.body.token)}` }
  const hook = await call(service, 'POST', '/webhooks', { headers: admin, body: { url: receiver.url, events: ['user.created', 'user.updated'] } })
  t.equal(hook.status, 201)
  receiver.secrets = [String(hook.body.secret)]
  const slow = await call(service, 'POST', '/webhooks', { headers: admin, body: { url: hung.url, events: ['user.created'] } })
  t.equal(slow.status, 201)
  hung.answer = () => ({ status: 200, delayMs: 3000 })
  const descriptors = service.usage().fds

  receiver.down()
  const users = []
  for (let i = 0; i < 5; i++) users.push(await signUp(service, `bb-hook-${i}@example.com`))
  for (const u of users) t.equal((await call(service, 'PUT', `/users/${u.id}/name`, { headers: u.auth, body: { name: 'Renamed' } })).status, 200)
  await new Promise((r) => setTimeout(r, 1500))
  receiver.up()
  receiver.answer = (r) => ({ status: 200, bodyBytes: r.event.type === 'user.updated' ? 8 * 1024 * 1024 : 0 })
  await until('every event after the outage', () => new Set(receiver.ids()).size === 10, 30_000)
  t.ok(receiver.received.every((r) => r.verified[0]), 'every delivery signed with the webhook\'s secret')
  t.equal(receiver.maxInFlight, 1)
  const listed = await call(service, 'GET', `/webhooks/${String(hook.body.id)}/deliveries?status=pending`, { headers: admin })
  await until('none pending', async () => ((await call(service, 'GET', `/webhooks/${String(hook.body.id)}/deliveries?status=pending`, { headers: admin })).body.items as unknown[]).length === 0)
  t.equal(listed.status, 200)
  await until('the hung receiver timed out and was recorded', async () => {
    const items = (await call(service, 'GET', `/webhooks/${String(slow.body.id)}/deliveries`, { headers: admin })).body.items as Array<{ last_error: string | null }>
    return items.some((d) => d.last_error?.includes('no answer') === true)
  })
  t.equal((await call(service, 'GET', '/health/live')).status, 200)
  t.ok(service.running(), 'the same process is still running')
  t.ok(service.usage().fds <= descriptors + 12, `descriptors back near where they were (${descriptors} → ${service.usage().fds})`)
})
