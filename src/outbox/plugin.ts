import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { backlog } from './repository.js'
import { Deliverer, type DelivererOptions } from './deliverer.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Delivers the outbox (mail, webhook deliveries) in the background while the app is ready. */
    outbox: Deliverer
  }
}

/**
 * The outbox: written by the services in their transactions, delivered in the background from the moment the app is
 * ready until it closes. The kinds (mail, webhooks) are added by their own plugins, registered after this one.
 */
async function outbox(app: FastifyInstance, options: Partial<DelivererOptions>): Promise<void> {
  const deliverer = new Deliverer(app.db, app.log, options, (kind, result) => app.metrics.delivered(kind, result))
  for (const kind of ['mail', 'webhook'] as const) app.metrics.watchOutbox(kind, () => backlog(app.db, kind, Date.now()))
  app.decorate('outbox', deliverer)
  app.addHook('onReady', async () => deliverer.start())
  app.addHook('preClose', async () => deliverer.stop())
}

export default fp(outbox, { name: 'outbox', dependencies: ['database', 'metrics'] })
