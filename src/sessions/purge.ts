import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Db } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { deleteSessions } from '../accounts/sessions.js'
import { Repeating } from '../common/repeating.js'

export interface PurgeOptions {
  /** Between two purges (PURGE_INTERVAL_SECONDS). */
  everyMs: number
  /** Rows deleted by one statement. */
  batch: number
}

/** Rows deleted by one statement: short statements, short locks. */
const BATCH = 500

/**
 * Deletes, in batches, what has expired: sessions (with their tokens; they had ended, so no event), then access and
 * refresh tokens. A spent refresh token is kept until it expires, so that its replay is still told from a stranger's
 * guess. Each batch is its own short transaction or statement, taking its rows in the order revocations take them
 * (refresh tokens, access tokens, sessions).
 */
export async function purgeExpired(db: Db, now: number, batch: number): Promise<number> {
  let purged = 0
  for (;;) {
    const sessions = await db.selectFrom('sessions').select('id').where('expires_at', '<=', now).limit(batch).execute()
    if (sessions.length) await inTransaction(db, (trx) => deleteSessions(trx, sessions.map((r) => r.id)))
    purged += sessions.length
    if (sessions.length < batch) break
  }
  for (const table of ['tokens', 'refresh_tokens'] as const) {
    for (;;) {
      const ids = (await db.selectFrom(table).select('id').where('expires_at', '<=', now).limit(batch).execute()).map((r) => r.id)
      if (ids.length) await db.deleteFrom(table).where('id', 'in', ids).execute()
      purged += ids.length
      if (ids.length < batch) break
    }
  }
  return purged
}

/**
 * The background purge of expired sessions and tokens, every PURGE_INTERVAL_SECONDS from the moment the app is ready
 * until it closes: requests never pay for it (a login used to delete its user's expired tokens).
 */
async function tokenPurge(app: FastifyInstance, options: Partial<PurgeOptions>): Promise<void> {
  const { everyMs, batch } = { everyMs: app.config.PURGE_INTERVAL_SECONDS * 1000, batch: BATCH, ...options }
  const purge = new Repeating(everyMs, () => purgeExpired(app.db, Date.now(), batch),
    (err) => app.log.warn({ err }, 'sessions: expired sessions and tokens could not be purged; trying again'))
  app.addHook('onReady', async () => purge.start())
  app.addHook('preClose', () => purge.stop())
}

export default fp(tokenPurge, { name: 'token-purge', dependencies: ['database'] })
