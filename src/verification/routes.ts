import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Email } from '../../schemas/email.js'
import { ref } from '../../schemas/ref.js'
import { EmailVerification, PasswordResetAccepted, PasswordResetConfirm, PasswordResetRequest } from '../../schemas/verification.js'
import { presentEmail } from '../accounts/present.js'
import { causeOf } from '../auth/steps.js'
import { withMultipart } from '../http/bodies.js'
import { FORM_TYPES, IdempotencyKey, NoContent, problems, tagged } from '../http/responses.js'

const tags = ['auth']

/** Sending mailed tokens back: an address verified, a password reset. Anyone may: the token is the proof. */
const verification: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.verification
  const resetTtl = app.config.PASSWORD_RESET_TTL_SECONDS

  app.post('/auth/email-verifications', {
    config: { auth: 'public' },
    schema: {
      operationId: 'verifyEmail', tags, consumes: FORM_TYPES, summary: 'Verify an address with the token mailed to it',
      description: 'The token proves the mail was read; it is single use and dies when its address is changed or removed. A bad, used or expired token is 400 INVALID_TOKEN. Nothing is ever verified by a GET: mail scanners open links.',
      body: ref(EmailVerification),
      response: { 200: ref(Email), ...problems([400, 'VALIDATION_FAILED', 'INVALID_TOKEN'], 413, 415) }
    }
  }, async (request, reply) => {
    const row = await service.confirm(request.body.token, causeOf(request))
    return tagged(reply, row.version, presentEmail(row, base))
  })

  app.post('/auth/password-resets', {
    config: { auth: 'public', idempotent: true },
    schema: {
      operationId: 'requestPasswordReset', tags, consumes: FORM_TYPES, summary: 'Ask for a password reset mail',
      description: 'Always 202 with the same body, after about the same time, whether or not the address belongs to anyone. A single-use token is mailed when the address is its user\'s primary or a verified one. 429 RATE_LIMITED when asked again for the same address within VERIFICATION_RESEND_SECONDS, or past MAIL_MAX_PER_CLIENT requests for mail from one client.',
      headers: IdempotencyKey, body: ref(PasswordResetRequest),
      response: { 202: ref(PasswordResetAccepted), ...problems(400, [409, 'IDEMPOTENCY_KEY_IN_USE'], 413, 415, 422) }
    }
  }, async (request, reply) => {
    await service.requestReset(request.body.email, request.client)
    return reply.code(202).header('cache-control', 'no-store').send({
      detail: 'If this address may receive a password reset, a mail with a token is on its way.',
      expires_in: resetTtl
    })
  })

  app.post('/auth/password-resets/confirm', {
    config: { auth: 'public' },
    schema: {
      operationId: 'confirmPasswordReset', tags, consumes: FORM_TYPES, summary: 'Choose a new password with a mailed reset token',
      description: 'Sets the password, marks the address the token was mailed to verified and ends every session of the user. A bad, used or expired token is 400 INVALID_TOKEN; failed tokens count against the client\'s limit of failed checks (429).',
      body: ref(PasswordResetConfirm),
      response: { 204: NoContent, ...problems([400, 'VALIDATION_FAILED', 'INVALID_TOKEN'], 413, 415) }
    }
  }, async (request, reply) => {
    await service.confirmReset(request.body.token, request.body.password, request.client, causeOf(request))
    return reply.code(204).send(null)
  })
}

export default withMultipart(verification)
