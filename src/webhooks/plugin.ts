import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { Repeating } from '../common/repeating.js'
import { systemResolver, type DestinationRules, type Resolver } from './destination.js'
import { fanOut } from './fanout.js'
import { WebhookKind, type WebhookDeliveryOptions } from './kind.js'
import { Poster } from './poster.js'
import { purgeExpiredSecrets } from './repository.js'

export interface WebhookPluginOptions {
  /** How host names are resolved (tests give their own, to play a name that changes its answer). */
  resolve?: Resolver
  /** Timings in milliseconds rather than the settings' seconds (tests shorten them). */
  delivery?: Partial<WebhookDeliveryOptions>
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Where webhooks may point, and how their hosts are resolved: the service checks URLs with it. */
    webhookDestinations: { rules: DestinationRules; resolve: Resolver }
  }
}

/**
 * Webhook deliveries: written for each event placed in the feed that an enabled webhook subscribes to (in the
 * sequencing transaction), and sent by the outbox as a kind of its own. Secrets past their overlap are purged every
 * PURGE_INTERVAL_SECONDS.
 */
async function webhookDelivery(app: FastifyInstance, options: WebhookPluginOptions): Promise<void> {
  const config = app.config
  const rules = { allowHttp: config.WEBHOOK_ALLOW_HTTP, allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS }
  const resolve = options.resolve ?? systemResolver
  app.decorate('webhookDestinations', { rules, resolve })
  const delivery: WebhookDeliveryOptions = {
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    retryBaseMs: config.WEBHOOK_RETRY_BASE_SECONDS * 1000,
    retryMaxMs: config.WEBHOOK_RETRY_MAX_SECONDS * 1000,
    maxAgeMs: config.WEBHOOK_MAX_AGE_SECONDS * 1000,
    disableAfterMs: config.WEBHOOK_DISABLE_AFTER_SECONDS * 1000,
    ...options.delivery
  }
  app.outbox.add(new WebhookKind(app.db, new Poster({ timeoutMs: delivery.timeoutMs, rules, resolve, log: app.log }), delivery, app.log))
  // Deliveries are written when events are placed: the outbox looks at once rather than at its next poll, and only
  // then (events no webhook takes cost the outbox nothing).
  app.sequencer.follow(fanOut, () => app.outbox.wake())
  const purge = new Repeating(config.PURGE_INTERVAL_SECONDS * 1000, () => purgeExpiredSecrets(app.db, Date.now()),
    (err) => app.log.warn({ err }, 'webhooks: secrets past their overlap could not be purged; trying again'))
  app.addHook('onReady', async () => purge.start())
  app.addHook('preClose', () => purge.stop())
}

export default fp(webhookDelivery, { name: 'webhook-delivery', dependencies: ['outbox', 'events'] })
