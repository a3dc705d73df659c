import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Id, PageQuery, UserParams } from '../../schemas/common.js'
import { ref } from '../../schemas/ref.js'
import { SessionCollection } from '../../schemas/session.js'
import { Token, TokenRequest } from '../../schemas/token.js'
import { callerOf, causeOf } from '../auth/steps.js'
import { invalidField } from '../common/errors.js'
import { isoTimestamp } from '../common/timestamps.js'
import { withMultipart } from '../http/bodies.js'
import { FORM_TYPES, IdempotencyKey, NoContent, pageUnder, problems } from '../http/responses.js'
import { presentSession, presentUser } from '../accounts/present.js'
import type { Issued } from './service.js'

/** The fields a grant needs, present: 400 naming the missing one otherwise. */
function requireField<T>(value: T | undefined, field: string, grant: string): T {
  if (value === undefined) throw invalidField(`/${field}`, 'body', `is required with grant_type=${grant}`)
  return value
}

/** Logging in and out are tagged `auth` in the document, the session listings `sessions`. */
const authTags = ['auth']
const tags = ['sessions']

const SessionParams = Type.Object({ user_id: Id, session_id: Id }, { additionalProperties: false })

const sessions: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.sessions

  await app.register(withMultipart(tokens))

  app.get('/users/:user_id/sessions', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'listUserSessions', tags, summary: 'List the live sessions of a user',
      description: 'Each login is a session; `current` marks the one the calling token belongs to.',
      params: UserParams, querystring: PageQuery,
      response: { 200: ref(SessionCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const userId = request.params.user_id
    const current = callerOf(request).session_id
    return pageUnder(reply, {
      base, path: `/users/${userId}/sessions`, scope: `sessions:${userId}`, query: request.query, cursors: app.cursors,
      fetch: (after, limit) => service.list(userId, after, limit),
      present: (row) => presentSession(row, base, current)
    })
  })

  await app.register(withMultipart(sessionWrites))
}

/** Ending sessions: in the scope of the routes that may carry a body, as every other DELETE. */
const sessionWrites: FastifyPluginAsyncTypebox = async (writes) => {
  const service = writes.services.sessions
  writes.delete('/users/:user_id/sessions/:session_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'deleteUserSession', tags, summary: 'End one session of a user',
      description: 'Its access and refresh tokens stop working at once. 404 SESSION_NOT_FOUND when the user has no such session.',
      params: SessionParams,
      response: { 204: NoContent, ...problems(400, 401, [404, 'USER_NOT_FOUND', 'SESSION_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    await service.end(request.params.user_id, request.params.session_id, causeOf(request))
    return reply.code(204).send(null)
  })

  writes.delete('/users/:user_id/sessions', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'deleteUserSessions', tags, summary: 'Sign out everywhere: end every session of a user',
      description: 'The calling session included.',
      params: UserParams,
      response: { 204: NoContent, ...problems(400, 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    await service.endAll(request.params.user_id, causeOf(request))
    return reply.code(204).send(null)
  })
}

/** Logging in, refreshing and out: routes that may carry a body, in every encoding (multipart included). */
const tokens: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.sessions

  app.post('/auth/tokens', {
    config: { auth: 'public', idempotent: true },
    schema: {
      operationId: 'createToken', tags: authTags, consumes: FORM_TYPES, summary: 'Log in, or refresh: a short-lived access token and a single-use refresh token',
      description: [
        '`grant_type=password` (the default) with `email` (any address of the user) and `password` starts a session;',
        '`grant_type=refresh_token` with `refresh_token` continues one, spending that refresh token.',
        '`grant_type=email_code` with `email` and `code` (mailed by POST /auth/email-codes) starts one and marks that address verified; a wrong, used or expired code is INVALID_CREDENTIALS, and a code dies after 5 wrong tries.',
        'A wrong address and a wrong password answer alike (INVALID_CREDENTIALS); a banned user gets USER_BANNED once its password checked out.',
        'A refresh token is single use: presented again, it ends its whole session (REFRESH_TOKEN_REUSED); unknown, expired or revoked, INVALID_GRANT.',
        'Password checks are limited per account and client address, per client address and per account (429 RATE_LIMITED with Retry-After).'
      ].join(' '),
      headers: IdempotencyKey, body: ref(TokenRequest),
      response: { 201: ref(Token), ...problems(400, [401, 'INVALID_CREDENTIALS', 'USER_BANNED', 'INVALID_GRANT', 'REFRESH_TOKEN_REUSED'], [409, 'IDEMPOTENCY_KEY_IN_USE'], 413, 415, 422, 429) }
    }
  }, async (request, reply) => {
    const body = request.body
    const grant = body.grant_type ?? 'password'
    const client = { address: request.client, agent: request.headers['user-agent'] }
    let issued: Issued
    if (grant === 'refresh_token') {
      issued = await service.refresh(requireField(body.refresh_token, 'refresh_token', grant), causeOf(request))
    } else if (grant === 'email_code') {
      if (!app.config.EMAIL_CODE_LOGIN) throw invalidField('/grant_type', 'body', 'email_code is off here (EMAIL_CODE_LOGIN=false)')
      issued = await service.loginByCode(requireField(body.email, 'email', grant), requireField(body.code, 'code', grant), client, causeOf(request))
    } else {
      issued = await service.login(requireField(body.email, 'email', grant), requireField(body.password, 'password', grant), client, causeOf(request))
    }
    return reply.code(201).header('cache-control', 'no-store').send({
      token: issued.token,
      token_type: 'Bearer',
      expires_in: Math.max(0, Math.round((issued.expiresAt - Date.now()) / 1000)),
      expires_at: isoTimestamp(issued.expiresAt),
      refresh_token: issued.refreshToken,
      refresh_expires_at: isoTimestamp(issued.refreshExpiresAt),
      session: presentSession(issued.session, base, issued.session.id),
      user: presentUser(issued.user, base)
    })
  })

  app.delete('/auth/tokens/current', {
    config: { auth: 'caller' },
    schema: {
      operationId: 'revokeCurrentToken', tags: authTags, summary: 'Log out: end the session of the calling token',
      description: 'Its access and refresh tokens stop working at once.',
      response: { 204: NoContent, ...problems([401, 'UNAUTHENTICATED']) }
    }
  }, async (request, reply) => {
    await service.logout(callerOf(request), causeOf(request))
    return reply.code(204).send(null)
  })
}

export default sessions
