import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import fastifyCookie from '@fastify/cookie'
import { presentUser } from '../accounts/present.js'
import type { UserRow } from '../accounts/users.js'
import { causeOf } from '../auth/steps.js'
import { Forbidden, invalidField, NotFound, Unauthenticated } from '../common/errors.js'
import { clearSessionCookies, CONSOLE_HEADER, consoleRefreshToken, consoleToken, setSessionCookies } from './session.js'

/**
 * The support console (/console): one page and its assets, served by the service itself, and the console's own
 * sign-in, which keeps the API's session in cookies the page's scripts cannot read (session.ts). Everything else
 * the page does, it does through the API, as an admin's client would.
 */

/** The page and its scripts may come from this origin only, and talk to it only; nothing inline. */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

interface Asset { body: Buffer; type: string }

/**
 * The page's files, read once: each asset under a name that carries its content's hash (cached for a year), the
 * page itself never cached. The front-end library (Preact with htm, one module) comes from its package.
 */
function loadAssets(): { page: string; assets: Map<string, Asset> } {
  const dir = new URL('../../console/', import.meta.url)
  const hashed = (name: string, body: Buffer) => name.replace(/\.(\w+)$/, `.${createHash('sha256').update(body).digest('hex').slice(0, 12)}.$1`)
  const vendor = readFileSync(new URL(import.meta.resolve('htm/preact/standalone')))
  const vendorName = hashed('preact-htm.js', vendor)
  const script = Buffer.from(readFileSync(new URL('app.js', dir), 'utf8').replace('./preact-htm.js', `./${vendorName}`))
  const style = readFileSync(new URL('app.css', dir))
  const icon = readFileSync(new URL('icon.svg', dir))
  const [scriptName, styleName, iconName] = [hashed('app.js', script), hashed('app.css', style), hashed('icon.svg', icon)]
  const assets = new Map<string, Asset>([
    [iconName, { body: icon, type: 'image/svg+xml' }],
    [vendorName, { body: vendor, type: 'text/javascript; charset=utf-8' }],
    [scriptName, { body: script, type: 'text/javascript; charset=utf-8' }],
    [styleName, { body: style, type: 'text/css; charset=utf-8' }]
  ])
  const page = readFileSync(new URL('index.html', dir), 'utf8').replace('app.css', `/console/assets/${styleName}`).replace('app.js', `/console/assets/${scriptName}`)
    .replace('icon.svg', `/console/assets/${iconName}`)
  return { page, assets }
}

const SignIn = Type.Object({
  email: Type.String({ minLength: 1, maxLength: 254 }),
  password: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  code: Type.Optional(Type.String({ minLength: 1, maxLength: 16 }))
}, { additionalProperties: false })

/** Only admins sign in to the console: anyone else is refused before a session is opened. */
const adminsOnly = (user: UserRow) => user.role === 'admin' ? undefined : new Forbidden('The console is for admins')

const consoleRoutes: FastifyPluginAsyncTypebox = async (app) => {
  // Cookies set and read by these routes only; the API's routes read the console's cookie in consoleToken.
  await app.register(fastifyCookie)
  const { page, assets } = loadAssets()
  const sessions = app.services.sessions
  const base = app.config.PUBLIC_URL ?? ''

  /** The console's own requests carry its header: a sign-in from another site's form is refused. */
  const fromConsole = (headers: Record<string, unknown>) => {
    if (headers[CONSOLE_HEADER] !== '1') throw new Forbidden(`Console requests carry the ${CONSOLE_HEADER} header`)
  }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('content-security-policy', CSP)
    reply.header('referrer-policy', 'no-referrer')
    reply.header('x-frame-options', 'DENY')
  })

  app.get('/console', { config: { auth: 'public' }, schema: { hide: true } }, async (_request, reply) => {
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(page)
  })

  app.get('/console/assets/:name', {
    config: { auth: 'public' }, schema: { hide: true, params: Type.Object({ name: Type.String({ maxLength: 100 }) }) }
  }, async (request, reply) => {
    const asset = assets.get(request.params.name)
    if (!asset) throw new NotFound('NOT_FOUND', 'The console has no such asset')
    return reply.type(asset.type).header('cache-control', 'public, max-age=31536000, immutable').send(asset.body)
  })

  /** Signs an admin in by password or by e-mail code, as POST /auth/tokens does (throttled alike); only admins stay. */
  app.post('/console/session', { config: { auth: 'public' }, schema: { hide: true, body: SignIn } }, async (request, reply) => {
    fromConsole(request.headers)
    const { email, password, code } = request.body
    if (code !== undefined && !app.config.EMAIL_CODE_LOGIN) throw invalidField('/code', 'body', 'sign-in by e-mail code is off here (EMAIL_CODE_LOGIN=false)')
    const client = { address: request.client, agent: request.headers['user-agent'] }
    if (code === undefined && password === undefined) throw new Unauthenticated('A password or an e-mail code is needed', 'INVALID_CREDENTIALS')
    const issued = code !== undefined
      ? await sessions.loginByCode(email, code, client, causeOf(request), adminsOnly)
      : await sessions.login(email, password ?? '', client, causeOf(request), adminsOnly)
    setSessionCookies(request, reply, base, issued)
    return reply.code(201).header('cache-control', 'no-store').send({ user: presentUser(issued.user, base) })
  })

  /** A new access token for the console's session, from its refresh cookie. */
  app.post('/console/session/refresh', { config: { auth: 'public' }, schema: { hide: true } }, async (request, reply) => {
    fromConsole(request.headers)
    const refresh = consoleRefreshToken(request)
    if (!refresh) throw new Unauthenticated('No console session')
    setSessionCookies(request, reply, base, await sessions.refresh(refresh, causeOf(request)))
    return reply.code(204).header('cache-control', 'no-store').send()
  })

  /** Signs the console out: the session its cookie holds ends (a bearer token is left alone), and the cookies go. */
  app.delete('/console/session', { config: { auth: 'public' }, schema: { hide: true } }, async (request, reply) => {
    fromConsole(request.headers)
    // Only the session the cookie holds: a request that also carries a bearer token is that token's, left alone.
    if (request.headers.authorization === undefined) {
      const refresh = consoleRefreshToken(request)
      if (consoleToken(request) !== undefined && request.caller) await sessions.logout(request.caller, causeOf(request))
      // An access cookie that has expired is not sent: the refresh cookie still names the session, which ends too.
      else if (refresh) await sessions.logoutByRefresh(refresh, causeOf(request))
    }
    clearSessionCookies(reply)
    return reply.code(204).send()
  })
}

export default consoleRoutes
