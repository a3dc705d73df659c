import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { Repeating } from '../common/repeating.js'
import { IdempotencyKeys } from './service.js'

declare module 'fastify' {
  interface FastifyInstance {
    idempotencyKeys: IdempotencyKeys
  }
}

/**
 * `app.idempotencyKeys`, the keys' store, and the purge of expired keys every PURGE_INTERVAL_SECONDS from the moment
 * the app is ready until it closes.
 */
async function idempotency(app: FastifyInstance): Promise<void> {
  const keys = new IdempotencyKeys(app.db)
  app.decorate('idempotencyKeys', keys)
  app.decorateRequest('idempotencyKey', null)
  const purge = new Repeating(app.config.PURGE_INTERVAL_SECONDS * 1000, () => keys.purge(),
    (err) => app.log.warn({ err }, 'idempotency: expired keys could not be purged; trying again'))
  app.addHook('onReady', async () => purge.start())
  app.addHook('preClose', () => purge.stop())
}

export default fp(idempotency, { name: 'idempotency', dependencies: ['database'] })
