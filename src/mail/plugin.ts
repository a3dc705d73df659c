import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { MailDeliverer, type DelivererOptions } from './deliverer.js'
import { backlog } from './repository.js'
import { logTransport, readSmtpCa, smtpTransport } from './transports.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Delivers the mail outbox in the background while the app is ready. */
    mail: MailDeliverer
  }
}

/**
 * Mail: written to the outbox by the services in their transactions, delivered in the background over SMTP_URL (or
 * to the log when unset) from the moment the app is ready until it closes.
 */
async function mail(app: FastifyInstance, options: Partial<DelivererOptions>): Promise<void> {
  const config = app.config
  const ca = config.SMTP_CA_FILE === undefined ? undefined : readSmtpCa(config.SMTP_CA_FILE)
  const transport = config.SMTP_URL ? smtpTransport(config.SMTP_URL, config.MAIL_FROM, ca) : logTransport(app.log)
  const deliverer = new MailDeliverer(app.db, transport, app.log, options, (result) => app.metrics.delivered('mail', result))
  app.metrics.watchOutbox('mail', () => backlog(app.db, Date.now()))
  app.decorate('mail', deliverer)
  app.addHook('onReady', async () => deliverer.start())
  app.addHook('preClose', async () => deliverer.stop())
}

export default fp(mail, { name: 'mail', dependencies: ['database', 'metrics'] })
