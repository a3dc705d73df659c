import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ref } from '../../schemas/ref.js'
import { Credentials, Token } from '../../schemas/token.js'
import { authenticationFailed } from '../lib/errors.js'
import { presentUser } from '../lib/present.js'
import { newToken, verifyPassword } from '../lib/secrets.js'
import { deleteToken, insertToken, purgeExpiredTokens } from '../repositories/tokens.js'
import { findCredentials, findUserById } from '../repositories/users.js'
import { withMultipart } from '../plugins/bodies.js'
import { FORM_TYPES, NoContent, problems } from './responses.js'

const tags = ['auth']
const wrongCredentials = () => authenticationFailed('INVALID_CREDENTIALS', 'The address or password is wrong')

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
    const { email, password } = request.body
    await app.loginGuard.check(email, request)
    const found = await findCredentials(app.db, email)
    // Unknown addresses are verified against a dummy hash: both failures take the same time.
    if (!(await verifyPassword(found?.password_hash, password)) || !found) {
      await app.loginGuard.failed(email, request)
      throw wrongCredentials()
    }
    await app.loginGuard.succeeded(email)
    if (found.status === 'BANNED') {
      throw authenticationFailed('USER_BANNED', 'This user is banned')
    }
    await purgeExpiredTokens(app.db, found.id)
    const { token, hash } = newToken()
    const expiresAt = await insertToken(app.db, found.id, hash, app.config.TOKEN_TTL_SECONDS)
    const user = await findUserById(app.db, found.id)
    if (!user) throw wrongCredentials()
    return reply.code(201).header('cache-control', 'no-store').send({
      token, token_type: 'Bearer', expires_at: new Date(expiresAt).toISOString(), user: presentUser(user, base)
    })
  })

  app.delete('/auth/tokens/current', {
    config: { auth: 'caller' },
    schema: {
      operationId: 'revokeCurrentToken', tags, summary: 'Log out: revoke the calling token',
      response: { 204: NoContent, ...problems(401) }
    }
  }, async (request, reply) => {
    await deleteToken(app.db, request.caller!.tokenHash)
    return reply.code(204).send(null)
  })
}

export default withMultipart(tokens)
