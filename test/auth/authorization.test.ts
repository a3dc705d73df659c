import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { App } from '../../src/app.js'
import { adminUser, assertProblem, build, form, login, multipart, newUser, type TestUser } from '../helpers.js'

type Rule = 'public' | 'caller' | 'self-or-admin' | 'owner' | 'admin' | 'scim'
type Kind = 'anonymous' | 'expired' | 'revoked' | 'banned' | 'self' | 'other' | 'admin'

interface Fixture { target: TestUser; emailId: number; secondEmailId: number; webhookId: number; deliveryId: number; importId: number; scimTokenId: number }

/** The contract's table of who may do what, independent of what the app declares. */
const CONTRACT: Record<string, {
  rule: Rule; declared?: Rule; body?: (f: Fixture) => Record<string, unknown>; ok: number
  /** A query string for the request. */
  query?: string
  /** The `:id` of the path, when it is not the target user's. */
  id?: string
  /** Run before each request of the row. */
  prepare?: (app: App) => Promise<unknown>
}> = {
  'GET /users': { rule: 'caller', ok: 200 },
  // No user_id in the path: declared for any caller, narrowed to self-or-admin by the handler once the user is found.
  'GET /users/email/:email': { rule: 'self-or-admin', declared: 'caller', ok: 200 },
  'GET /users/:user_id': { rule: 'self-or-admin', ok: 200 },
  'DELETE /users/:user_id': { rule: 'self-or-admin', ok: 204 },
  'GET /users/:user_id/export': { rule: 'self-or-admin', ok: 200 },
  // The newest user (the row's target) scheduled for deletion, directly: there is something to restore.
  'POST /users/:user_id/restore': {
    rule: 'admin', ok: 200, prepare: async (app) => {
      const newest = await app.db.selectFrom('users').select('id').orderBy('id', 'desc').limit(1).executeTakeFirstOrThrow()
      await app.db.updateTable('users').set({ deletion_scheduled_at: Date.now() + 60_000 }).where('id', '=', newest.id).execute()
    }
  },
  'PUT /users/:user_id/name': { rule: 'self-or-admin', body: () => ({ name: 'Renamed' }), ok: 200 },
  'PUT /users/:user_id/password': { rule: 'self-or-admin', body: (f) => ({ password: 'new-password-9', current_password: f.target.password }), ok: 204 },
  'PUT /users/:user_id/status': { rule: 'admin', body: () => ({ status: 'BANNED' }), ok: 200 },
  'PUT /users/:user_id/role': { rule: 'admin', body: () => ({ role: 'admin' }), ok: 200 },
  'GET /users/:user_id/emails': { rule: 'self-or-admin', ok: 200 },
  'POST /users/:user_id/emails': { rule: 'self-or-admin', body: (f) => ({ address: `added.${f.target.id}@example.com` }), ok: 201 },
  'GET /users/:user_id/emails/:email_id': { rule: 'self-or-admin', ok: 200 },
  // The fixture's sign-up mailed the address a moment ago: that mail is made old enough for a resend, and the
  // address's own resend interval (VERIFICATION_RESEND_SECONDS=1 below) waited out.
  'POST /users/:user_id/emails/:email_id/verification': {
    rule: 'self-or-admin', ok: 202, prepare: async (app) => {
      await app.db.updateTable('email_tokens').set({ created_at: 0 }).execute()
      await new Promise((resolve) => setTimeout(resolve, 1_050))
    }
  },
  'PUT /users/:user_id/emails/:email_id': { rule: 'self-or-admin', body: (f) => ({ address: `changed.${f.target.id}@example.com` }), ok: 200 },
  'DELETE /users/:user_id/emails/:email_id': { rule: 'owner', ok: 204 },
  'GET /users/:user_id/email': { rule: 'self-or-admin', ok: 200 },
  'PUT /users/:user_id/email': { rule: 'self-or-admin', body: (f) => ({ email: `placed.${f.target.id}@example.com` }), ok: 200 },
  'POST /users/:user_id/email': { rule: 'self-or-admin', body: (f) => ({ email: `posted.${f.target.id}@example.com` }), ok: 200 },
  'DELETE /users/:user_id/email': { rule: 'owner', ok: 204 },
  'GET /users/:user_id/sessions': { rule: 'self-or-admin', ok: 200 },
  'DELETE /users/:user_id/sessions/:session_id': { rule: 'self-or-admin', ok: 204 },
  'DELETE /users/:user_id/sessions': { rule: 'self-or-admin', ok: 204 },
  'GET /events': { rule: 'admin', ok: 200 },
  // Webhooks are made disabled, at a public address given as such (no DNS): nothing is sent from this test.
  'GET /webhooks': { rule: 'admin', ok: 200 },
  'POST /webhooks': { rule: 'admin', body: () => ({ url: 'https://93.184.216.34/hook', events: ['user.created'], enabled: false }), ok: 201 },
  'GET /webhooks/:webhook_id': { rule: 'admin', ok: 200 },
  'PUT /webhooks/:webhook_id': { rule: 'admin', body: () => ({ url: 'https://93.184.216.34/v2', events: ['user.*'], enabled: false }), ok: 200 },
  'DELETE /webhooks/:webhook_id': { rule: 'admin', ok: 204 },
  'POST /webhooks/:webhook_id/secret': { rule: 'admin', ok: 201 },
  'GET /webhooks/:webhook_id/deliveries': { rule: 'admin', ok: 200 },
  'GET /webhooks/:webhook_id/deliveries/:delivery_id': { rule: 'admin', ok: 200 },
  'POST /webhooks/:webhook_id/deliveries/:delivery_id/retry': { rule: 'admin', ok: 202 },
  'GET /users/:user_id/events': { rule: 'self-or-admin', ok: 200 },
  'GET /users/:user_id/metadata': { rule: 'self-or-admin', ok: 200 },
  'PATCH /users/:user_id/metadata': { rule: 'self-or-admin', body: () => ({ unsafe: { theme: 'dark' } }), ok: 200 },
  'PUT /users/:user_id/metadata': { rule: 'self-or-admin', body: () => ({ unsafe: { theme: 'light' } }), ok: 200 },
  // A dry run: the line is checked, nothing is written.
  'POST /imports': { rule: 'admin', query: '?dry_run=true', body: (f) => ({ email: `imported.${f.target.id}@example.com` }), ok: 202 },
  'GET /imports': { rule: 'admin', ok: 200 },
  'GET /imports/:import_id': { rule: 'admin', ok: 200 },
  'GET /imports/:import_id/errors': { rule: 'admin', ok: 200 },
  'GET /exports/users': { rule: 'admin', ok: 200 },
  'POST /scim-tokens': { rule: 'admin', body: () => ({ description: 'Okta' }), ok: 201 },
  'GET /scim-tokens': { rule: 'admin', ok: 200 },
  'DELETE /scim-tokens/:token_id': { rule: 'admin', ok: 204 },
  // SCIM: an admin's token opens it as a SCIM token does (test/scim/ proves those); its refusals are SCIM's errors.
  'GET /scim/v2/ServiceProviderConfig': { rule: 'scim', ok: 200 },
  'GET /scim/v2/ResourceTypes': { rule: 'scim', ok: 200 },
  'GET /scim/v2/ResourceTypes/:id': { rule: 'scim', id: 'User', ok: 200 },
  'GET /scim/v2/Schemas': { rule: 'scim', ok: 200 },
  'GET /scim/v2/Schemas/:id': { rule: 'scim', id: 'urn:ietf:params:scim:schemas:core:2.0:User', ok: 200 },
  'GET /scim/v2/Users': { rule: 'scim', ok: 200 },
  'POST /scim/v2/Users': { rule: 'scim', body: (f) => ({ userName: `scim.${f.target.id}@example.com` }), ok: 201 },
  'GET /scim/v2/Users/:id': { rule: 'scim', ok: 200 },
  'PUT /scim/v2/Users/:id': { rule: 'scim', body: (f) => ({ userName: f.target.email, displayName: 'Replaced' }), ok: 200 },
  'PATCH /scim/v2/Users/:id': { rule: 'scim', body: () => ({ Operations: [{ op: 'replace', path: 'displayName', value: 'Patched' }] }), ok: 200 },
  'DELETE /scim/v2/Users/:id': { rule: 'scim', ok: 204 },
  // Last: as 'other' and 'admin' it revokes the tokens the rows above use.
  'DELETE /auth/tokens/current': { rule: 'caller', ok: 204 }
}
const PUBLIC = [
  'POST /users', 'POST /auth/tokens', 'GET /health/live', 'GET /health/ready', 'GET /openapi.json', 'GET /openapi-3.0.json',
  'POST /auth/email-verifications', 'POST /auth/password-resets', 'POST /auth/password-resets/confirm', 'POST /auth/email-codes', 'POST /auth/email-reverts',
  // The console's page and its own sign-in (test/console/ proves who gets a session there).
  'GET /console', 'GET /console/assets/:name', 'POST /console/session', 'POST /console/session/refresh', 'DELETE /console/session'
]

function expected(rule: Rule, kind: Kind, ok: number): number | 'UNAUTHENTICATED' | 'FORBIDDEN' {
  if (['anonymous', 'expired', 'revoked', 'banned'].includes(kind)) return 'UNAUTHENTICATED'
  if (rule === 'caller') return ok
  if (kind === 'self') return rule === 'admin' || rule === 'scim' ? 'FORBIDDEN' : ok
  if (kind === 'other') return 'FORBIDDEN'
  return rule === 'owner' ? 'FORBIDDEN' : ok // admin
}

async function snapshot(app: App) {
  const users = await app.db.selectFrom('users').select(['id', 'name', 'status', 'role', 'version', 'password_hash']).orderBy('id').execute()
  const emails = await app.db.selectFrom('emails').select(['id', 'user_id', 'address', 'primary_user_id', 'version']).orderBy('id').execute()
  const tokens = await app.db.selectFrom('tokens').select(['token_hash']).orderBy('token_hash').execute()
  const sessions = await app.db.selectFrom('sessions').select(['id', 'user_id', 'expires_at']).orderBy('id').execute()
  const mails = await app.db.selectFrom('outbox').select(['id']).orderBy('id').execute()
  const emailTokens = await app.db.selectFrom('email_tokens').select(['id']).orderBy('id').execute()
  const events = await app.db.selectFrom('events').select(['id']).orderBy('id').execute()
  const webhooks = await app.db.selectFrom('webhooks').select(['id', 'url', 'events', 'enabled']).orderBy('id').execute()
  const webhookSecrets = await app.db.selectFrom('webhook_secrets').select(['id', 'secret', 'expires_at']).orderBy('id').execute()
  const deliveries = await app.db.selectFrom('outbox').select(['id', 'state', 'next_attempt_at']).where('kind', '=', 'webhook').orderBy('id').execute()
  return JSON.stringify({ users, emails, tokens, sessions, mails, emailTokens, events, webhooks, webhookSecrets, deliveries })
}

async function fixture(app: App): Promise<Fixture> {
  const target = await newUser(app)
  const emails = (await app.inject({ url: `/users/${target.id}/emails`, headers: target.headers })).json().items
  const second = (await app.inject({ method: 'POST', url: `/users/${target.id}/emails`, headers: target.headers, payload: { address: `second.${target.id}@example.com` } })).json()
  // A disabled webhook with one delivery, put in place directly: nothing is ever sent to it.
  const now = Date.now()
  const webhook = await app.db.insertInto('webhooks').values({
    url: 'https://93.184.216.34/hook', events: '["user.*"]', enabled: 0, description: '',
    disabled_reason: null, failing_since: null, lease: null, lease_until: null, created_at: now, updated_at: now
  }).executeTakeFirstOrThrow()
  const webhookId = Number(webhook.insertId)
  await app.db.insertInto('webhook_secrets').values({ webhook_id: webhookId, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', created_at: now, expires_at: null }).execute()
  const delivery = await app.db.insertInto('outbox').values({
    kind: 'webhook', template: 'user.created', recipient: '', data: '{}', state: 'sent', attempts: 1, created_at: now, next_attempt_at: now,
    claim: null, sent_at: now, last_error: null, webhook_id: webhookId, event_id: 'evt_01JD0000000000000000000000',
    last_attempt_at: now, last_status_code: 200
  }).executeTakeFirstOrThrow()
  const done = await app.db.insertInto('imports').values({
    status: 'succeeded', received: 1, format: 'roster', dry_run: 1, on_conflict: 'skip', parameters: null, created_by: target.id, request_id: null, created_at: now
  }).executeTakeFirstOrThrow()
  const scimToken = await app.db.insertInto('scim_tokens')
    .values({ token_hash: randomBytes(32).toString('hex'), description: 'x', created_by: null, created_at: now, last_used_at: null }).executeTakeFirstOrThrow()
  return {
    target, emailId: emails[0].id, secondEmailId: second.id, webhookId, deliveryId: Number(delivery.insertId), importId: Number(done.insertId),
    scimTokenId: Number(scimToken.insertId)
  }
}

function request(key: string, f: Fixture) {
  const [method, template] = key.split(' ') as [string, string]
  const url = template
    .replace(':user_id', String(f.target.id))
    .replace(':email_id', String(key.startsWith('DELETE') ? f.secondEmailId : f.emailId))
    .replace(':session_id', String(f.target.sessionId))
    .replace(':email', encodeURIComponent(f.target.email))
    .replace(':webhook_id', String(f.webhookId))
    .replace(':delivery_id', String(f.deliveryId))
    .replace(':import_id', String(f.importId))
    .replace(':token_id', String(f.scimTokenId))
    .replace(':id', CONTRACT[key]!.id ?? String(f.target.id)) + (CONTRACT[key]!.query ?? '')
  const body = CONTRACT[key]!.body?.(f)
  return { method: method as 'GET', url, ...(body ? { payload: body } : {}) }
}

t.test('every route, every kind of caller', async (t) => {
  const app = await build(t, { env: { VERIFICATION_RESEND_SECONDS: '1' } })
  const admin = await adminUser(app)

  const served = [...new Set(app.routePlans.filter((r) => r.method !== 'HEAD' && !r.url.startsWith('/docs')).map((r) => `${r.method} ${r.url}`))]
  t.same(served.filter((k) => !PUBLIC.includes(k)).sort(), Object.keys(CONTRACT).sort(), 'the table covers every route the app serves')
  for (const r of app.routePlans) {
    const key = `${r.method} ${r.url}`
    if (CONTRACT[key]) t.equal(r.config.auth, CONTRACT[key].declared ?? CONTRACT[key].rule, `${key} declares the contract's rule`)
    else if (PUBLIC.includes(key)) t.equal(r.config.auth, 'public', `${key} is public`)
  }

  const other = await newUser(app)
  const banned = await newUser(app)
  await app.inject({ method: 'PUT', url: `/users/${banned.id}/status`, headers: admin.headers, payload: { status: 'BANNED' } })
  const expiring = await newUser(app)
  await app.db.updateTable('tokens').set({ expires_at: Date.now() - 1000 }).where('user_id', '=', expiring.id).execute()
  const revoking = await newUser(app)
  await app.inject({ method: 'DELETE', url: '/auth/tokens/current', headers: revoking.headers })

  for (const key of Object.keys(CONTRACT)) {
    const { rule, ok } = CONTRACT[key]!
    const refusals = await fixture(app)
    for (const kind of ['anonymous', 'expired', 'revoked', 'banned', 'other', 'self', 'admin'] as Kind[]) {
      const f = kind === 'admin' ? await fixture(app) : refusals
      const headers = {
        anonymous: {}, expired: expiring.headers, revoked: revoking.headers, banned: banned.headers,
        other: other.headers, self: f.target.headers, admin: admin.headers
      }[kind]
      const want = expected(rule, kind, ok)
      await CONTRACT[key]!.prepare?.(app)
      const before = await snapshot(app)
      const res = await app.inject({ ...request(key, f), headers })
      if (typeof want === 'number') {
        t.equal(res.statusCode, want, `${key} as ${kind}: ${want} (${res.body.slice(0, 100)})`)
      } else if (key.includes(' /scim/v2/')) {
        t.equal(res.statusCode, 401, `${key} as ${kind}: 401`)
        t.match(res.json(), { schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'], status: '401' }, `${key} as ${kind}: SCIM's error`)
        t.equal(await snapshot(app), before, `${key} as ${kind}: nothing changed`)
      } else {
        assertProblem(t, res, 401, want, `${key} as ${kind}`)
        t.equal(await snapshot(app), before, `${key} as ${kind}: nothing changed`)
      }
    }
  }
  // DELETE /auth/tokens/current revoked the tokens used as 'self' and 'admin'; nothing else depends on them.
})

t.test('id aliases, cross-parent ids and method override reach nothing', async (t) => {
  const app = await build(t)
  const admin = await adminUser(app)
  const a = await fixture(app)
  const b = await fixture(app)
  const before = await snapshot(app)
  for (const alias of [`0${a.target.id}`, `${a.target.id}e0`, `%20${a.target.id}`, `+${a.target.id}`, `0x${a.target.id.toString(16)}`]) {
    for (const who of [a.target, admin]) {
      assertProblem(t, await app.inject({ url: `/users/${alias}`, headers: who.headers }), 400, 'VALIDATION_FAILED', `GET /users/${alias}`)
      assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${alias}`, headers: who.headers }), 400, 'VALIDATION_FAILED', `DELETE /users/${alias}`)
      assertProblem(t, await app.inject({ method: 'PUT', url: `/users/${a.target.id}/emails/${alias}`, headers: who.headers, payload: { address: 'z@example.com' } }), 400, 'VALIDATION_FAILED', 'email_id alias')
    }
  }
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/users/${a.target.id}/`, headers: a.target.headers }), 404, 'NOT_FOUND', 'trailing slash')
  for (const who of [a.target, admin]) {
    const cross = await app.inject({ method: 'PUT', url: `/users/${a.target.id}/emails/${b.emailId}`, headers: who.headers, payload: { address: 'stolen@example.com' } })
    assertProblem(t, cross, 404, 'EMAIL_NOT_FOUND', 'cross-parent PUT')
  }
  const crossDelete = await app.inject({ method: 'DELETE', url: `/users/${a.target.id}/emails/${b.secondEmailId}`, headers: a.target.headers })
  assertProblem(t, crossDelete, 404, 'EMAIL_NOT_FOUND', 'cross-parent DELETE by the owner of the path')
  const override = await app.inject({ method: 'POST', url: `/users/${b.target.id}/emails/${b.secondEmailId}`, headers: { ...admin.headers, 'x-http-method-override': 'DELETE' } })
  assertProblem(t, override, 401, 'FORBIDDEN', 'override to an owner-only DELETE')
  const escalate = await app.inject({ method: 'POST', url: `/users/${a.target.id}/status`, headers: { ...a.target.headers, 'x-http-method-override': 'PUT' }, payload: { status: 'ACTIVE' } })
  assertProblem(t, escalate, 401, 'FORBIDDEN', 'override to an admin-only PUT')
  t.equal(await snapshot(app), before, 'nothing changed')
})

t.test('mass assignment in every encoding', async (t) => {
  const app = await build(t)
  const user = await newUser(app)
  const before = await snapshot(app)
  const base = { name: 'Mallory', email: 'mallory@example.com', password: 'password-123' }
  for (const [field, value, status, code] of [
    ['role', 'admin', 401, 'UNAUTHENTICATED'], ['status', 'ACTIVE', 401, 'UNAUTHENTICATED'],
    ['id', '1', 400, 'VALIDATION_FAILED'], ['created_at', '2000-01-01T00:00:00.000Z', 400, 'VALIDATION_FAILED'],
    ['version', '99', 400, 'VALIDATION_FAILED'], ['password_hash', 'x', 400, 'VALIDATION_FAILED']
  ] as const) {
    const fields = { ...base, [field]: value }
    for (const [name, enc] of [['json', { payload: fields }], ['form', form(fields)], ['multipart', multipart(fields)]] as const) {
      assertProblem(t, await app.inject({ method: 'POST', url: '/users', ...enc }), status, code, `POST /users with ${field} as ${name}`)
    }
    const asUser = await app.inject({ method: 'PUT', url: `/users/${user.id}/name`, headers: user.headers, payload: { name: 'Renamed', [field]: value } })
    assertProblem(t, asUser, 400, 'VALIDATION_FAILED', `PUT name with ${field}`)
    const encoded = multipart(fields)
    const roleByPlain = await app.inject({ method: 'POST', url: '/users', payload: encoded.payload, headers: { ...encoded.headers, ...user.headers } })
    t.ok(roleByPlain.statusCode === 401 || roleByPlain.statusCode === 400, `a plain user cannot set ${field} either`)
  }
  t.equal(await snapshot(app), before, 'nothing changed')
  t.ok(await login(app, user.email, user.password))
})
