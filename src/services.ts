import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { AddressMail } from './accounts/address-mail.js'
import { EmailCodes } from './accounts/codes.js'
import { sharedSecret } from './database/app-secrets.js'
import { meetsOwasp, Passwords } from './accounts/secrets.js'
import { EmailsService } from './emails/service.js'
import { FeedService } from './feed/service.js'
import { MetadataService } from './users/metadata-service.js'
import { SessionsService } from './sessions/service.js'
import { UsersService } from './users/service.js'
import { VerificationService } from './verification/service.js'
import { WebhooksService } from './webhooks/service.js'

export interface Services {
  users: UsersService
  metadata: MetadataService
  emails: EmailsService
  sessions: SessionsService
  verification: VerificationService
  feed: FeedService
  webhooks: WebhooksService
}

declare module 'fastify' {
  interface FastifyInstance {
    services: Services
  }
}

/**
 * The least time a password reset request takes to answer: long enough to cover writing the token and its mail,
 * so that the answer's timing does not tell whether the address belongs to anyone.
 */
const RESET_ANSWER_MS = 100

/** The features' services (the rules), over the database, the limits and the mail outbox, as the routes call them. */
async function services(app: FastifyInstance): Promise<void> {
  const config = app.config
  const { db, limits } = app
  const claimSeconds = config.UNVERIFIED_CLAIM_SECONDS
  const cost = { memoryKib: config.PASSWORD_HASH_MEMORY_KIB, passes: config.PASSWORD_HASH_PASSES }
  if (!meetsOwasp(cost)) {
    app.log.warn(cost, 'password hashes are cheaper than OWASP recommends (PASSWORD_HASH_MEMORY_KIB, PASSWORD_HASH_PASSES): for tests only')
  }
  const passwords = new Passwords(cost)
  const codes = new EmailCodes(await sharedSecret(db, 'email-code'), config.EMAIL_CODE_TTL_SECONDS * 1000, limits.events)
  const addressMail = new AddressMail({
    codes,
    verificationTtlSeconds: config.VERIFICATION_TTL_SECONDS,
    resetTtlSeconds: config.PASSWORD_RESET_TTL_SECONDS,
    revertTtlSeconds: config.EMAIL_REVERT_TTL_SECONDS,
    linkTemplate: config.APP_LINK_TEMPLATE,
    resendSeconds: config.VERIFICATION_RESEND_SECONDS,
    maxPerClient: config.MAIL_MAX_PER_CLIENT,
    clientWindowSeconds: config.LOGIN_WINDOW_SECONDS
  }, limits.events, () => app.outbox.wake())
  app.decorate('services', {
    users: new UsersService(db, passwords, limits.guard, addressMail, {
      signupOpen: config.SIGNUP_OPEN, claimSeconds, reauthMaxAgeSeconds: config.REAUTH_MAX_AGE_SECONDS,
      deletionGraceSeconds: config.ACCOUNT_DELETION_GRACE_SECONDS
    }),
    metadata: new MetadataService(db, { maxBytes: config.METADATA_MAX_BYTES }),
    emails: new EmailsService(db, addressMail, { maxPerUser: config.MAX_EMAILS_PER_USER, requireEmail: config.REQUIRE_EMAIL, claimSeconds }),
    verification: new VerificationService(db, passwords, addressMail, limits.guard, codes, {
      resendSeconds: config.VERIFICATION_RESEND_SECONDS, resetAnswerMs: RESET_ANSWER_MS, claimSeconds
    }),
    feed: new FeedService(db, app.sequencer),
    webhooks: new WebhooksService(db, {
      ...app.webhookDestinations, secretOverlapMs: config.WEBHOOK_SECRET_OVERLAP_SECONDS * 1000, wake: () => app.outbox.wake()
    }),
    sessions: new SessionsService(db, passwords, limits.guard, codes, {
      loggedIn: (result) => app.metrics.login(result),
      unrecorded: (err) => app.log.error({ err }, 'events: a login.failed event could not be written'),
      accessTtlSeconds: config.ACCESS_TOKEN_TTL_SECONDS,
      refreshTtlSeconds: config.REFRESH_TOKEN_TTL_SECONDS,
      sessionMaxAgeSeconds: config.SESSION_MAX_AGE_SECONDS,
      maxSessionsPerUser: config.MAX_SESSIONS_PER_USER
    })
  })
}

export default fp(services, { name: 'services', dependencies: ['database', 'limits', 'outbox', 'mail', 'metrics', 'events', 'webhook-delivery'] })
