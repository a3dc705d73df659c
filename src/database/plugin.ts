import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { createDatabase } from './index.js'

/**
 * The database, owned by the app: opened from DATABASE_URL (the embedded SQLite file when unset), migrated when
 * MIGRATE_ON_START holds, closed with the app, after every plugin registered later has closed.
 */
async function database(app: FastifyInstance): Promise<void> {
  const config = app.config
  const { db, dialect, migrate, poolUse } = createDatabase({
    url: config.DATABASE_URL, poolSize: config.DB_POOL_SIZE, queueLimit: config.DB_QUEUE_LIMIT, timeoutMs: config.DB_TIMEOUT_MS
  })
  app.decorate('db', db)
  app.decorate('dialect', dialect)
  app.addHook('onClose', async () => db.destroy())
  if (poolUse) app.metrics.watchPool(poolUse)
  if (config.MIGRATE_ON_START) {
    const applied = await migrate()
    if (applied.length) app.log.info({ applied, dialect }, 'database migrated')
  }
}

export default fp(database, { name: 'database', dependencies: ['metrics'] })
