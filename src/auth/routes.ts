import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ref } from '../../schemas/ref.js'
import { Token, TokenRequest } from '../../schemas/token.js'
import { isoTimestamp } from '../common/timestamps.js'
import { callerOf } from '../http/authenticate.js'
import { withMultipart } from '../http/bodies.js'
import { FORM_TYPES, IdempotencyKey, NoContent, problems } from '../http/responses.js'
import { presentSession } from '../sessions/present.js'
import { presentUser } from '../users/present.js'
import { requireField, type Issued } from './service.js'

const tags = ['auth']

const tokens: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.auth

  app.post('/auth/tokens', {
    config: { auth: 'public', idempotent: true },
    schema: {
      operationId: 'createToken', tags, consumes: FORM_TYPES, summary: 'Log in, or refresh: a short-lived access token and a single-use refresh token',
      description: [
        '`grant_type=password` (the default) with `email` (any address of the user) and `password` starts a session;',
        '`grant_type=refresh_token` with `refresh_token` continues one, spending that refresh token.',
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
    const issued: Issued = grant === 'refresh_token'
      ? await service.refresh(requireField(body.refresh_token, 'refresh_token', grant))
      : await service.login(requireField(body.email, 'email', grant), requireField(body.password, 'password', grant),
        { address: request.client, agent: request.headers['user-agent'] })
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
      operationId: 'revokeCurrentToken', tags, summary: 'Log out: end the session of the calling token',
      description: 'Its access and refresh tokens stop working at once.',
      response: { 204: NoContent, ...problems([401, 'UNAUTHENTICATED']) }
    }
  }, async (request, reply) => {
    await service.logout(callerOf(request))
    return reply.code(204).send(null)
  })
}

export default withMultipart(tokens)
