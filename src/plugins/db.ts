import fp from 'fastify-plugin'
import { createDatabase, migrateToLatest } from '../database.js'
import { CursorCodec } from '../lib/cursor.js'
import { sharedSecret } from '../repositories/secrets.js'

/**
 * Opens the database named by DATABASE_URL (embedded SQLite when unset), migrates it when configured,
 * decorates `app.db`, and closes it with the app.
 */
export default fp(async (app) => {
  const { db, dialect } = createDatabase({
    url: app.config.DATABASE_URL,
    poolSize: app.config.DB_POOL_SIZE,
    queueLimit: app.config.DB_QUEUE_LIMIT
  })
  app.decorate('db', db)
  app.decorate('dialect', dialect)
  app.addHook('onClose', async () => {
    await db.destroy()
  })
  if (app.config.MIGRATE_ON_START) {
    const applied = await migrateToLatest(db)
    if (applied.length) app.log.info({ applied, dialect }, 'database migrated')
  }
  app.decorate('cursors', new CursorCodec(await sharedSecret(db, 'cursor')))
}, { name: 'db', dependencies: ['config'], fastify: '5.x' })
