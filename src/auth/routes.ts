import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ref } from '../../schemas/ref.js'
import { Credentials, Token } from '../../schemas/token.js'
import { isoTimestamp } from '../common/timestamps.js'
import { callerOf } from '../http/authenticate.js'
import { withMultipart } from '../http/bodies.js'
import { FORM_TYPES, NoContent, problems } from '../http/responses.js'
import { presentUser } from '../users/present.js'

const tags = ['auth']

const tokens: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''

  app.post('/auth/tokens', {
    config: { auth: 'public' },
    schema: {
      operationId: 'createToken', tags, consumes: FORM_TYPES, summary: 'Log in: exchange an address and password for a bearer token',
      description: 'Any address of the user works. A wrong address and a wrong password answer alike (INVALID_CREDENTIALS); a banned user gets USER_BANNED once its password checked out. Failed logins are limited per account and per client address (429 RATE_LIMITED with Retry-After).',
      body: ref(Credentials),
      response: { 201: ref(Token), ...problems(400, 401, 413, 415, 429) }
    }
  }, async (request, reply) => {
    const { token, expiresAt, user } = await app.services.auth.login(request.body.email, request.body.password, request.ip)
    return reply.code(201).header('cache-control', 'no-store').send({
      token, token_type: 'Bearer', expires_at: isoTimestamp(expiresAt), user: presentUser(user, base)
    })
  })

  app.delete('/auth/tokens/current', {
    config: { auth: 'caller' },
    schema: {
      operationId: 'revokeCurrentToken', tags, summary: 'Log out: revoke the calling token',
      response: { 204: NoContent, ...problems(401) }
    }
  }, async (request, reply) => {
    await app.services.auth.logout(callerOf(request))
    return reply.code(204).send(null)
  })
}

export default withMultipart(tokens)
