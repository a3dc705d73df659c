import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Email } from '../../schemas/email.js'
import { ref } from '../../schemas/ref.js'
import {
  EmailCodeAccepted, EmailCodeRequest, EmailRevert, EmailVerification, PasswordResetAccepted, PasswordResetConfirm, PasswordResetRequest
} from '../../schemas/verification.js'
import { presentEmail } from '../accounts/present.js'
import { causeOf } from '../auth/steps.js'
import { invalidField, NotFound } from '../common/errors.js'
import { withMultipart } from '../http/bodies.js'
import { FORM_TYPES, IdempotencyKey, NoContent, problems, tagged } from '../http/responses.js'
import type { MailedProof } from './service.js'

const tags = ['auth']

/** The token, or the address and the code: one of the two, whole (400 VALIDATION_FAILED otherwise). */
function proofOf(body: { token?: string | undefined; email?: string | undefined; code?: string | undefined }): MailedProof {
  if (body.token !== undefined) {
    if (body.email !== undefined || body.code !== undefined) throw invalidField('/token', 'body', 'goes alone: send the token, or the address and the code')
    return { token: body.token }
  }
  if (body.email === undefined) throw invalidField('/email', 'body', 'is required with a code (or send the token instead)', 'token, or email and code, is required')
  if (body.code === undefined) throw invalidField('/code', 'body', 'is required with the address (or send the token instead)', 'token, or email and code, is required')
  return { email: body.email, code: body.code }
}

/** Sending mailed tokens back: an address verified, a password reset. Anyone may: the token is the proof. */
const verification: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.verification
  const resetTtl = app.config.PASSWORD_RESET_TTL_SECONDS

  app.post('/auth/email-verifications', {
    config: { auth: 'public' },
    schema: {
      operationId: 'verifyEmail', tags, consumes: FORM_TYPES, summary: 'Verify an address with the token mailed to it',
      description: 'The token, or the address and the 6-digit code of the mail, proves it was read; it is single use and dies when its address is changed or removed. A bad, used or expired token or code is 400 INVALID_TOKEN; a code dies after 5 wrong tries, and wrong codes count against the client\'s limit of failed checks (429). Nothing is ever verified by a GET: mail scanners open links.',
      body: ref(EmailVerification),
      response: { 200: ref(Email), ...problems([400, 'VALIDATION_FAILED', 'INVALID_TOKEN'], 413, 415) }
    }
  }, async (request, reply) => {
    const row = await service.confirm(proofOf(request.body), request.client, causeOf(request))
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

  app.post('/auth/email-codes', {
    config: { auth: 'public', idempotent: true },
    schema: {
      operationId: 'requestSignInCode', tags, consumes: FORM_TYPES, summary: 'Ask for a sign-in code by mail',
      description: 'Always 202 with the same body, after about the same time, whether or not the address belongs to anyone. A 6-digit code is mailed when the address is a primary or verified address of an active user; `POST /auth/tokens` with `grant_type=email_code`, `email` and `code` signs in with it. 429 RATE_LIMITED when asked again for the same address within VERIFICATION_RESEND_SECONDS, or past MAIL_MAX_PER_CLIENT requests for mail from one client. 404 NOT_FOUND with EMAIL_CODE_LOGIN=false.',
      headers: IdempotencyKey, body: ref(EmailCodeRequest),
      response: { 202: ref(EmailCodeAccepted), ...problems(400, [404, 'NOT_FOUND'], [409, 'IDEMPOTENCY_KEY_IN_USE'], 413, 415, 422) }
    }
  }, async (request, reply) => {
    if (!app.config.EMAIL_CODE_LOGIN) throw new NotFound('NOT_FOUND', 'Sign-in by e-mail code is off (EMAIL_CODE_LOGIN=false)')
    await service.requestSignInCode(request.body.email, request.client)
    return reply.code(202).header('cache-control', 'no-store').send({
      detail: 'If this address may sign in, a mail with a code is on its way.',
      expires_in: app.config.EMAIL_CODE_TTL_SECONDS
    })
  })

  app.post('/auth/password-resets/confirm', {
    config: { auth: 'public' },
    schema: {
      operationId: 'confirmPasswordReset', tags, consumes: FORM_TYPES, summary: 'Choose a new password with a mailed reset token',
      description: 'With the token, or the address and the 6-digit code of the mail: sets the password, marks the address the mail went to verified and ends every session of the user. A bad, used or expired token or code is 400 INVALID_TOKEN (a code dies after 5 wrong tries); failed ones count against the client\'s limit of failed checks (429).',
      body: ref(PasswordResetConfirm),
      response: { 204: NoContent, ...problems([400, 'VALIDATION_FAILED', 'INVALID_TOKEN'], 413, 415) }
    }
  }, async (request, reply) => {
    await service.confirmReset(proofOf(request.body), request.body.password, request.client, causeOf(request))
    return reply.code(204).send(null)
  })

  app.post('/auth/email-reverts', {
    config: { auth: 'public' },
    schema: {
      operationId: 'revertPrimaryEmail', tags, consumes: FORM_TYPES, summary: 'Take a change of primary address back',
      description: 'When a user\'s primary address changes (another address made primary, or the primary replaced), the former primary, if it was verified, is mailed a token and a 6-digit code valid EMAIL_REVERT_TTL_SECONDS. Either makes that address the verified primary again (re-added if it was removed, even past MAX_EMAILS_PER_USER), takes the verified mark and the tokens from the address that had replaced it, spends every revert, reset and sign-in token of the user, ends every session of the user (`session.ended` with reason `primary_reverted`) and answers 204. 409 EMAIL_TAKEN when another user holds the address now. A bad, used or expired token or code is 400 INVALID_TOKEN (a code dies after 5 wrong tries); failed ones count against the client\'s limit of failed checks (429).',
      body: ref(EmailRevert),
      response: { 204: NoContent, ...problems([400, 'VALIDATION_FAILED', 'INVALID_TOKEN'], [409, 'EMAIL_TAKEN'], 413, 415) }
    }
  }, async (request, reply) => {
    await service.revert(proofOf(request.body), request.client, causeOf(request))
    return reply.code(204).send(null)
  })
}

export default withMultipart(verification)
