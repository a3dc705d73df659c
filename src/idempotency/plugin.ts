import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { IdempotencyKeys } from './service.js'

declare module 'fastify' {
  interface FastifyInstance {
    idempotencyKeys: IdempotencyKeys
  }
}

/** How often expired keys are purged. */
const PURGE_EVERY_MS = 600_000

/** `app.idempotencyKeys`, the keys' store, and the timer that purges expired keys while the app runs. */
async function idempotency(app: FastifyInstance): Promise<void> {
  const keys = new IdempotencyKeys(app.db)
  app.decorate('idempotencyKeys', keys)
  app.decorateRequest('idempotencyKey', null)
  let timer: NodeJS.Timeout | undefined
  app.addHook('onReady', async () => {
    timer = setInterval(() => { keys.purge().catch((err: unknown) => app.log.warn({ err }, 'idempotency: purge failed')) }, PURGE_EVERY_MS)
    timer.unref()
  })
  app.addHook('preClose', async () => clearInterval(timer))
}

export default fp(idempotency, { name: 'idempotency', dependencies: ['database'] })
