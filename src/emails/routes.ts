import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import { EmailParams, PageQuery, UserParams } from '../../schemas/common.js'
import { Email, EmailChange, EmailCollection, NewEmail, PrimaryEmailValue, VerificationSent } from '../../schemas/email.js'
import { ref } from '../../schemas/ref.js'
import { isoTimestamp } from '../common/timestamps.js'
import { causeOf, mailingClient } from '../auth/steps.js'
import { withMultipart } from '../http/bodies.js'
import { ifMatchVersions } from '../http/etag.js'
import { acceptRawBodies, BARE_VALUE_NOTE, KEY_PATH_BODY_LIMIT, keyPathBody } from '../http/key-path.js'
import { FORM_TYPES, IdempotencyKey, IfMatch, NoContent, pageUnder, problems, tagged } from '../http/responses.js'
import { emailPath, presentEmail } from '../accounts/present.js'

const tags = ['emails']

/**
 * Form fields are text: `primary=true` in a urlencoded or multipart body is the boolean. Any other text stays text
 * and fails validation, as a JSON string would.
 */
async function formBooleans(request: FastifyRequest): Promise<void> {
  const body = request.body as Record<string, unknown> | null | undefined
  if (body && typeof body.primary === 'string' && (body.primary === 'true' || body.primary === 'false')) body.primary = body.primary === 'true'
}

const emails: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.emails

  app.get('/users/:user_id/emails', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'listUserEmails', tags, summary: 'List the addresses of a user',
      description: 'Every address of the user, verified or not, in the order they were added; one of them is primary when the user has any.',
      params: UserParams, querystring: PageQuery,
      response: { 200: ref(EmailCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const userId = request.params.user_id
    return pageUnder(reply, {
      base, path: `/users/${userId}/emails`, scope: `emails:${userId}`, query: request.query, cursors: app.cursors,
      fetch: (after, limit) => service.list(userId, after, limit),
      present: (row) => presentEmail(row, base)
    })
  })

  app.get('/users/:user_id/emails/:email_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'getUserEmail', tags, summary: 'Read one address of a user',
      description: 'An address is reached only under its own user: another user\'s address id is 404 EMAIL_NOT_FOUND.',
      params: EmailParams,
      response: { 200: ref(Email), ...problems(400, 401, [404, 'USER_NOT_FOUND', 'EMAIL_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const { user_id: userId, email_id: emailId } = request.params
    const row = await service.get(userId, { id: emailId })
    return tagged(reply, row.version, presentEmail(row, base))
  })

  app.get('/users/:user_id/email', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'getUserPrimaryEmail', tags, summary: 'Read the primary address of a user',
      description: 'The address the user\'s `email` field shows; 404 EMAIL_NOT_FOUND when the user has none.',
      params: UserParams,
      response: { 200: ref(Email), ...problems(400, 401, [404, 'USER_NOT_FOUND', 'EMAIL_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const row = await service.get(request.params.user_id, 'primary')
    return tagged(reply, row.version, presentEmail(row, base))
  })

  app.post('/users/:user_id/emails/:email_id/verification', {
    config: { auth: 'self-or-admin', idempotent: true },
    schema: {
      operationId: 'resendEmailVerification', tags, summary: 'Send the verification mail of an address again',
      description: 'Mails a new single-use token to the address (earlier ones stay valid until they expire). 409 EMAIL_ALREADY_VERIFIED; 429 RATE_LIMITED within VERIFICATION_RESEND_SECONDS of the last verification mail to the address (those sent on sign-up, adding and replacing included), or past MAIL_MAX_PER_CLIENT requests for mail from one client.',
      params: EmailParams, headers: IdempotencyKey,
      response: { 202: ref(VerificationSent), ...problems(400, 401, [404, 'USER_NOT_FOUND', 'EMAIL_NOT_FOUND'], [409, 'EMAIL_ALREADY_VERIFIED', 'IDEMPOTENCY_KEY_IN_USE'], 422) }
    }
  }, async (request, reply) => {
    const { user_id: userId, email_id: emailId } = request.params
    const { row, expiresAt } = await app.services.verification.resend(userId, emailId, mailingClient(request))
    return reply.code(202).send({ sent_to: row.address, expires_at: isoTimestamp(expiresAt) })
  })

  await app.register(withMultipart(emailWrites))
}

/** Adding, replacing and removing addresses: the routes that take a body. */
const emailWrites: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.emails

  app.post('/users/:user_id/emails', {
    config: { auth: 'self-or-admin', idempotent: true },
    schema: {
      operationId: 'addUserEmail', tags, consumes: FORM_TYPES, summary: 'Add an address to a user',
      description: 'The address is added unverified and a verification mail is sent to it. The first address of a user becomes its primary. 409 EMAIL_TAKEN when any user has the address (case-insensitively; an unverified address set more than UNVERIFIED_CLAIM_SECONDS ago is taken from its holder instead), 409 EMAIL_LIMIT past MAX_EMAILS_PER_USER.',
      params: UserParams, headers: IdempotencyKey, body: ref(NewEmail),
      response: { 201: ref(Email), ...problems(400, 401, [404, 'USER_NOT_FOUND'], [409, 'EMAIL_TAKEN', 'EMAIL_LIMIT', 'IDEMPOTENCY_KEY_IN_USE'], 413, 415, 422) }
    }
  }, async (request, reply) => {
    const row = await service.add(request.params.user_id, request.body.address, mailingClient(request), causeOf(request))
    const email = presentEmail(row, base)
    return reply.code(201).header('location', email.href).send(tagged(reply, row.version, email))
  })

  app.put('/users/:user_id/emails/:email_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'updateUserEmail', tags, consumes: FORM_TYPES, summary: 'Change one address of a user in place, or make it primary',
      description: 'A new `address` (same id) is unverified and mailed a verification token. `primary: true` makes a verified address the primary (409 EMAIL_UNVERIFIED otherwise); the former primary stays as a secondary address; if it was verified, it is mailed a token and a code that take the change back (`POST /auth/email-reverts`).',
      params: EmailParams, headers: IfMatch, body: ref(EmailChange),
      response: { 200: ref(Email), ...problems(400, 401, [404, 'USER_NOT_FOUND', 'EMAIL_NOT_FOUND'], [409, 'EMAIL_TAKEN', 'EMAIL_UNVERIFIED'], 412, 413, 415) }
    },
    preValidation: formBooleans
  }, async (request, reply) => {
    const { user_id: userId, email_id: emailId } = request.params
    const row = await service.update(userId, emailId, request.body, ifMatchVersions(request.headers['if-match']), mailingClient(request), causeOf(request))
    return tagged(reply, row.version, presentEmail(row, base))
  })

  app.delete('/users/:user_id/emails/:email_id', {
    config: { auth: 'owner' },
    schema: {
      operationId: 'deleteUserEmail', tags, summary: 'Remove one address (owner only)',
      description: 'Only the owning user may remove its addresses, admins included in the refusal. Removing the primary promotes the oldest verified remaining address (else the oldest); removing the last is 401 EMAIL_REQUIRED while REQUIRE_EMAIL is true.',
      params: EmailParams, headers: IfMatch,
      response: { 204: NoContent, ...problems(400, [401, 'UNAUTHENTICATED', 'FORBIDDEN', 'EMAIL_REQUIRED'], [404, 'USER_NOT_FOUND', 'EMAIL_NOT_FOUND'], 412) }
    }
  }, async (request, reply) => {
    const { user_id: userId, email_id: emailId } = request.params
    await service.remove(userId, { id: emailId }, ifMatchVersions(request.headers['if-match']), causeOf(request))
    return reply.code(204).send(null)
  })

  app.delete('/users/:user_id/email', {
    config: { auth: 'owner' },
    schema: {
      operationId: 'deleteUserPrimaryEmail', tags, summary: 'Remove the primary address (owner only)',
      description: 'The oldest verified remaining address (else the oldest) becomes primary. 401 EMAIL_REQUIRED when it is the last address while REQUIRE_EMAIL is true.',
      params: UserParams, headers: IfMatch,
      response: { 204: NoContent, ...problems(400, [401, 'UNAUTHENTICATED', 'FORBIDDEN', 'EMAIL_REQUIRED'], [404, 'USER_NOT_FOUND', 'EMAIL_NOT_FOUND'], 412) }
    }
  }, async (request, reply) => {
    await service.remove(request.params.user_id, 'primary', ifMatchVersions(request.headers['if-match']), causeOf(request))
    return reply.code(204).send(null)
  })

  await app.register(primaryKeyPath)
}

/**
 * PUT or POST a value at /users/{user_id}/email: replaces the primary address in place, or creates it. POST does
 * what PUT does (the contract serves both); the document describes PUT and mentions POST, so that generated SDKs get
 * one method.
 */
const primaryKeyPath: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.emails
  await acceptRawBodies(app)
  for (const method of ['PUT', 'POST'] as const) {
    app.route({
      method,
      url: '/users/:user_id/email',
      config: { auth: 'self-or-admin', idempotent: method === 'POST' },
      bodyLimit: KEY_PATH_BODY_LIMIT,
      preValidation: keyPathBody('email'),
      schema: {
        hide: method === 'POST',
        operationId: method === 'PUT' ? 'setUserPrimaryEmail' : 'postUserPrimaryEmail', tags, consumes: FORM_TYPES,
        summary: 'Place the primary address of a user',
        description: `Replaces the primary address in place (same id), or creates it (201) when the user has none. A new address is unverified and mailed a verification token; the former one, if verified, is mailed a token and a code that take the change back (POST /auth/email-reverts). POST to the same path does the same (and takes an Idempotency-Key). ${BARE_VALUE_NOTE}`,
        params: UserParams, headers: method === 'POST' ? Type.Composite([IfMatch, IdempotencyKey]) : IfMatch, body: ref(PrimaryEmailValue),
        response: { 200: ref(Email), 201: ref(Email), ...problems(400, 401, [404, 'USER_NOT_FOUND'], [409, 'EMAIL_TAKEN', ...(method === 'POST' ? ['IDEMPOTENCY_KEY_IN_USE' as const] : [])], 412, 413, ...(method === 'POST' ? [422] : [])) }
      },
      handler: async (request, reply) => {
        const userId = request.params.user_id
        const { row, created } = await service.placePrimary(userId, request.body.email, ifMatchVersions(request.headers['if-match']), mailingClient(request), causeOf(request))
        if (created) reply.code(201).header('location', base + emailPath(userId, row.id))
        return tagged(reply, row.version, presentEmail(row, base))
      }
    })
  }
}

export default emails
