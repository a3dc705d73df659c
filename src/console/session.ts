import { fastifyCookie } from '@fastify/cookie'
import type { FastifyReply, FastifyRequest } from 'fastify'

// The console's session is the API's own, kept where the page's scripts cannot read it: the access token in an
// HttpOnly, SameSite=Strict cookie (Secure over TLS), the refresh token in another sent only to /console/session.
// Either counts only on requests that carry the console's header: a cross-site form or link cannot set a header,
// and a cross-site script cannot without a CORS preflight this service never grants with credentials.

export const CONSOLE_HEADER = 'x-roster-console'
const ACCESS = 'roster_console'
const REFRESH = 'roster_console_refresh'
const REFRESH_PATH = '/console/session'

/**
 * The access token a console request carries, if it is one (its header and its cookie). Read for every request
 * without a bearer token, so the cookie header is parsed here, and only for the console's requests.
 */
export function consoleToken(request: FastifyRequest): string | undefined {
  if (request.headers[CONSOLE_HEADER] !== '1' || request.headers.cookie === undefined) return undefined
  return fastifyCookie.parse(request.headers.cookie)[ACCESS]
}

export function consoleRefreshToken(request: FastifyRequest): string | undefined {
  return request.cookies[REFRESH]
}

/** Sets both cookies for a session's tokens, each for as long as it lives: Secure over TLS, or when PUBLIC_URL is https. */
export function setSessionCookies(
  request: FastifyRequest, reply: FastifyReply, publicUrl: string, issued: { token: string; expiresAt: number; refreshToken: string; refreshExpiresAt: number }
): void {
  const secure = request.protocol === 'https' || publicUrl.startsWith('https:')
  const common = { httpOnly: true, sameSite: 'strict' as const, secure }
  reply.setCookie(ACCESS, issued.token, { ...common, path: '/', maxAge: seconds(issued.expiresAt) })
  reply.setCookie(REFRESH, issued.refreshToken, { ...common, path: REFRESH_PATH, maxAge: seconds(issued.refreshExpiresAt) })
}

export function clearSessionCookies(reply: FastifyReply): void {
  reply.clearCookie(ACCESS, { path: '/' })
  reply.clearCookie(REFRESH, { path: REFRESH_PATH })
}

const seconds = (until: number) => Math.max(0, Math.floor((until - Date.now()) / 1000))
