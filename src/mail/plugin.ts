import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { MailKind, type MailOptions } from './kind.js'
import { logTransport, readSmtpCa, smtpTransport } from './transports.js'

/**
 * Mail: written to the outbox by the services in their transactions, delivered by the outbox over SMTP_URL (or to
 * the log when unset).
 */
async function mail(app: FastifyInstance, options: Partial<MailOptions>): Promise<void> {
  const config = app.config
  const ca = config.SMTP_CA_FILE === undefined ? undefined : readSmtpCa(config.SMTP_CA_FILE)
  const transport = config.SMTP_URL ? smtpTransport(config.SMTP_URL, config.MAIL_FROM, ca) : logTransport(app.log)
  app.outbox.add(new MailKind(transport, options))
}

export default fp(mail, { name: 'mail', dependencies: ['outbox'] })
