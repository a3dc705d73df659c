import t from 'tap'
import type { App } from '../../src/app.js'
import { ADMIN, adminUser, assertProblem, build, newUser } from '../helpers.js'
import { codeIn, TestSmtp } from '../mail/smtp.js'

const CONSOLE = { 'x-roster-console': '1' }

/** The cookies an answer sets, by name: value and attributes. */
function cookiesOf(res: { headers: Record<string, unknown> }): Map<string, string> {
  const header = res.headers['set-cookie']
  const lines = Array.isArray(header) ? header as string[] : typeof header === 'string' ? [header] : []
  return new Map(lines.map((line) => [line.slice(0, line.indexOf('=')), line]))
}
const valueOf = (line: string | undefined) => line?.slice(line.indexOf('=') + 1, line.indexOf(';')) ?? ''

async function signIn(app: App, body: Record<string, string>, headers: Record<string, string> = CONSOLE) {
  return app.inject({ method: 'POST', url: '/console/session', headers, payload: body })
}

t.test('the console signs admins in with cookies no script reads; they count only with its header', async (t) => {
  const app = await build(t, { env: { TRUST_PROXY: '127.0.0.1' } })
  const admin = await adminUser(app)
  const res = await signIn(app, { email: ADMIN.email, password: ADMIN.password })
  t.equal(res.statusCode, 201, res.body)
  t.notOk('token' in res.json(), 'no token in the body')
  const cookies = cookiesOf(res)
  const access = cookies.get('roster_console')
  const refresh = cookies.get('roster_console_refresh')
  t.match(access, /HttpOnly/)
  t.match(access, /SameSite=Strict/)
  t.match(access, /Path=\//)
  t.notMatch(access, /Secure/, 'not Secure over plain HTTP')
  t.match(refresh, /Path=\/console\/session;/, 'the refresh cookie goes to the console\'s session routes only')
  const cookie = `roster_console=${valueOf(access)}; roster_console_refresh=${valueOf(refresh)}`

  const read = await app.inject({ url: `/users/${admin.id}`, headers: { ...CONSOLE, cookie } })
  t.equal(read.statusCode, 200, 'with its header, the cookie is the admin\'s session')
  assertProblem(t, await app.inject({ url: `/users/${admin.id}`, headers: { cookie } }), 401, 'UNAUTHENTICATED', 'without it (a link from another site), nobody')
  const renamed = await app.inject({ method: 'PUT', url: `/users/${admin.id}/name`, headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'name=Evil' })
  assertProblem(t, renamed, 401, 'UNAUTHENTICATED', 'a cross-site form changes nothing')

  const renewed = await app.inject({ method: 'POST', url: '/console/session/refresh', headers: { ...CONSOLE, cookie } })
  t.equal(renewed.statusCode, 204)
  const next = cookiesOf(renewed)
  t.not(valueOf(next.get('roster_console')), valueOf(access), 'a new access token')
  assertProblem(t, await app.inject({ method: 'POST', url: '/console/session/refresh', headers: { ...CONSOLE, cookie } }), 401, 'REFRESH_TOKEN_REUSED', 'the old refresh is spent')

  const tls = await app.inject({ method: 'POST', url: '/console/session', headers: { ...CONSOLE, 'x-forwarded-proto': 'https' }, payload: { email: ADMIN.email, password: ADMIN.password } })
  t.equal(tls.statusCode, 201)
  t.match(cookiesOf(tls).get('roster_console'), /; Secure/, 'Secure when served over TLS')

  // Signing out ends the session the cookie holds, and no other: a bearer token beside it is left alone.
  const bearerAndConsole = await app.inject({ method: 'DELETE', url: '/console/session', headers: { ...CONSOLE, ...admin.headers } })
  t.equal(bearerAndConsole.statusCode, 204)
  t.equal((await app.inject({ url: `/users/${admin.id}`, headers: admin.headers })).statusCode, 200, 'the bearer token still works')
  const fresh = cookiesOf(await signIn(app, { email: ADMIN.email, password: ADMIN.password })).get('roster_console')
  const own = `roster_console=${valueOf(fresh)}`
  t.equal((await app.inject({ method: 'DELETE', url: '/console/session', headers: { ...CONSOLE, cookie: own } })).statusCode, 204)
  assertProblem(t, await app.inject({ url: `/users/${admin.id}`, headers: { ...CONSOLE, cookie: own } }), 401, 'UNAUTHENTICATED', 'the signed-out session is over')

  // Once the access cookie has expired the browser sends only the refresh cookie: signing out still ends the session.
  const later = cookiesOf(await signIn(app, { email: ADMIN.email, password: ADMIN.password }))
  const [laterAccess, laterRefresh] = [`roster_console=${valueOf(later.get('roster_console'))}`, `roster_console_refresh=${valueOf(later.get('roster_console_refresh'))}`]
  t.equal((await app.inject({ method: 'DELETE', url: '/console/session', headers: { ...CONSOLE, cookie: laterRefresh } })).statusCode, 204)
  assertProblem(t, await app.inject({ method: 'POST', url: '/console/session/refresh', headers: { ...CONSOLE, cookie: laterRefresh } }), 401, 'INVALID_GRANT', 'its refresh token is dead')
  assertProblem(t, await app.inject({ url: `/users/${admin.id}`, headers: { ...CONSOLE, cookie: laterAccess } }), 401, 'UNAUTHENTICATED', 'and so is its access token')
})

t.test('behind a proxy that ends TLS, an https PUBLIC_URL makes the cookies Secure; codes only where they sign in', async (t) => {
  const app = await build(t, { env: { PUBLIC_URL: 'https://roster.example.com', EMAIL_CODE_LOGIN: 'false' } })
  const res = await signIn(app, { email: ADMIN.email, password: ADMIN.password })
  t.match(cookiesOf(res).get('roster_console'), /; Secure/)
  assertProblem(t, await signIn(app, { email: ADMIN.email, code: '123456' }), 400, 'VALIDATION_FAILED', 'EMAIL_CODE_LOGIN=false')
})

t.test('the console refuses non-admins, requests without its header, and wrong passwords as the API does', async (t) => {
  const app = await build(t, { env: { LOGIN_MAX_FAILURES: '2' } })
  const user = await newUser(app)
  const refused = await signIn(app, { email: user.email, password: user.password })
  assertProblem(t, refused, 401, 'FORBIDDEN')
  t.equal(cookiesOf(refused).size, 0, 'no cookie for a plain user')
  const sessions = await app.inject({ url: `/users/${user.id}/sessions`, headers: user.headers })
  t.equal(sessions.json<{ items: unknown[] }>().items.length, 1, 'its own session is all it has')
  const opened = await app.db.selectFrom('events').select('type').where('user_id', '=', user.id).where('type', 'in', ['session.created', 'session.ended']).execute()
  t.same(opened.map((e) => e.type), ['session.created'], 'the refusal opened no session, so none was ended either')

  assertProblem(t, await signIn(app, { email: ADMIN.email, password: ADMIN.password }, {}), 401, 'FORBIDDEN', 'a sign-in without the console\'s header (a cross-site form)')
  assertProblem(t, await signIn(app, { email: ADMIN.email }), 401, 'INVALID_CREDENTIALS')
  assertProblem(t, await signIn(app, { email: ADMIN.email, password: 'wrong-password-1' }), 401, 'INVALID_CREDENTIALS')
  await signIn(app, { email: ADMIN.email, password: 'wrong-password-2' })
  assertProblem(t, await signIn(app, { email: ADMIN.email, password: 'wrong-password-3' }), 429, 'RATE_LIMITED', 'throttled like every login')
  const out = await app.inject({ method: 'DELETE', url: '/console/session', headers: CONSOLE })
  t.equal(out.statusCode, 204)
  t.match(cookiesOf(out).get('roster_console'), /Expires=Thu, 01 Jan 1970/, 'signing out clears the cookies')
})

t.test('the page and its assets: a strict CSP, hashed assets cached for a year, the page never', async (t) => {
  const app = await build(t)
  const page = await app.inject('/console')
  t.equal(page.statusCode, 200)
  t.match(page.headers['content-security-policy'], /default-src 'none'; script-src 'self'; style-src 'self'/)
  t.equal(page.headers['cache-control'], 'no-cache')
  t.notMatch(page.body, /<script>|style=/, 'nothing inline')
  const assets = [...page.body.matchAll(/\/console\/assets\/([\w.-]+)/g)].map((m) => m[1]!)
  t.equal(assets.length, 3)
  for (const name of assets) {
    const asset = await app.inject(`/console/assets/${name}`)
    t.equal(asset.statusCode, 200, name)
    t.equal(asset.headers['cache-control'], 'public, max-age=31536000, immutable')
  }
  const script = await app.inject(`/console/assets/${assets.find((a) => a.startsWith('app.') && a.endsWith('.js'))!}`)
  const vendor = /\.\/(preact-htm\.\w+\.js)/.exec(script.body)?.[1]
  t.ok(vendor, 'the script imports the library by its hashed name')
  t.equal((await app.inject(`/console/assets/${vendor!}`)).statusCode, 200)
  t.equal((await app.inject('/console/assets/nothing.js')).statusCode, 404)
})

t.test('an admin signs in to the console by a code mailed to its address', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { mail: { pollMs: 50 }, env: { SMTP_URL: smtp.url } })
  const asked = await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: ADMIN.email } })
  t.equal(asked.statusCode, 202)
  const code = codeIn(await smtp.waitFor(ADMIN.email))
  const res = await signIn(app, { email: ADMIN.email, code })
  t.equal(res.statusCode, 201, res.body)
  t.ok(cookiesOf(res).has('roster_console'), 'its session in the cookie')
  assertProblem(t, await signIn(app, { email: ADMIN.email, code }), 401, 'INVALID_CREDENTIALS', 'a code signs in once')

  const user = await newUser(app)
  t.equal((await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: user.email } })).statusCode, 202)
  // Its first mail is the address's verification; the second, the sign-in code.
  const refused = await signIn(app, { email: user.email, code: codeIn(await smtp.waitFor(user.email, 2)) })
  assertProblem(t, refused, 401, 'FORBIDDEN', 'a plain user\'s right code does not open the console')
  t.equal(cookiesOf(refused).size, 0)
  const created = await app.db.selectFrom('events').select('type').where('user_id', '=', user.id).where('type', '=', 'session.created').execute()
  t.equal(created.length, 1, 'nor a session: the one it had is its only one')
})

t.test('a refused sign-in changes nothing: the code stays live, an ended ban waits for its job, no failure counts', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { mail: { pollMs: 50 }, bans: { everyMs: 60_000 }, env: { SMTP_URL: smtp.url, LOGIN_MAX_FAILURES: '2' } })
  const admin = await adminUser(app)
  const user = await newUser(app)
  t.equal((await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email: user.email } })).statusCode, 202)
  const code = codeIn(await smtp.waitFor(user.email, 2))
  const ban = await app.inject({ method: 'PUT', url: `/users/${user.id}/status`, headers: admin.headers, payload: { status: 'BANNED', until: new Date(Date.now() + 300).toISOString() } })
  t.equal(ban.statusCode, 200, ban.body)
  await new Promise((resolve) => setTimeout(resolve, 400))

  for (let i = 0; i < 3; i++) {
    assertProblem(t, await signIn(app, { email: user.email, code }), 401, 'FORBIDDEN', `refused by code (${i + 1})`)
    assertProblem(t, await signIn(app, { email: user.email, password: user.password }), 401, 'FORBIDDEN', `refused by password (${i + 1})`)
  }
  const row = await app.db.selectFrom('users').select('status').where('id', '=', user.id).executeTakeFirstOrThrow()
  t.equal(row.status, 'BANNED', 'the ended ban was not lifted by a refused sign-in')
  const changes = await app.db.selectFrom('events').select('type').where('user_id', '=', user.id).where('type', '=', 'user.status_changed').execute()
  t.equal(changes.length, 1, 'the ban\'s own event alone')

  const byCode = await app.inject({ method: 'POST', url: '/auth/tokens', payload: { grant_type: 'email_code', email: user.email, code } })
  t.equal(byCode.statusCode, 201, `the code still signs in through the API, and the refusals were no failed attempts: ${byCode.body}`)
  const lifted = await app.db.selectFrom('users').select('status').where('id', '=', user.id).executeTakeFirstOrThrow()
  t.equal(lifted.status, 'ACTIVE', 'that sign-in lifted the ban')
})
