import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Db } from '../database/index.js'
import { inTransaction, locksRows } from '../database/transaction.js'
import { deleteInBatches, PURGE_BATCH } from '../database/batches.js'
import { deleteSessions } from '../accounts/sessions.js'
import { Repeating } from '../common/repeating.js'

export interface PurgeOptions {
  /** Between two purges (PURGE_INTERVAL_SECONDS). */
  everyMs: number
  /** Rows deleted by one statement. */
  batch: number
}

/**
 * Deletes, in batches, what has expired: sessions (with their tokens; they had ended, so no event), then access and
 * refresh tokens. A spent refresh token is kept until it expires, so that its replay is still told from a stranger's
 * guess. Each batch is its own short transaction or statement. A batch of sessions is locked first (MySQL), still
 * expired, and only then are its tokens deleted: every writer takes a session's row before its tokens (a sign-in and
 * a revocation after the user's row), so the purge, which takes no user lock, never waits on one of them in the
 * opposite order.
 */
export async function purgeExpired(db: Db, now: number, batch: number): Promise<number> {
  const expired = (table: 'sessions' | 'tokens' | 'refresh_tokens') => async (limit: number) =>
    (await db.selectFrom(table).select('id').where('expires_at', '<=', now).limit(limit).execute()).map((r) => r.id)
  let purged = await deleteInBatches(batch, expired('sessions'), (ids) => inTransaction(db, async (trx) => {
    let query = trx.selectFrom('sessions').select('id').where('id', 'in', ids).where('expires_at', '<=', now)
    if (locksRows(trx)) query = query.forUpdate()
    const locked = (await query.execute()).map((r) => r.id)
    await deleteSessions(trx, locked)
    return locked.length
  }))
  for (const table of ['tokens', 'refresh_tokens'] as const) {
    purged += await deleteInBatches(batch, expired(table), async (ids) => {
      await db.deleteFrom(table).where('id', 'in', ids).execute()
      return ids.length
    })
  }
  return purged
}

/**
 * The background purge of expired sessions and tokens, every PURGE_INTERVAL_SECONDS from the moment the app is ready
 * until it closes: requests never pay for it (a login used to delete its user's expired tokens).
 */
async function tokenPurge(app: FastifyInstance, options: Partial<PurgeOptions>): Promise<void> {
  const { everyMs, batch } = { everyMs: app.config.PURGE_INTERVAL_SECONDS * 1000, batch: PURGE_BATCH, ...options }
  const purge = new Repeating(everyMs, () => purgeExpired(app.db, Date.now(), batch),
    (err) => app.log.warn({ err }, 'sessions: expired sessions and tokens could not be purged; trying again'))
  app.addHook('onReady', async () => purge.start())
  app.addHook('preClose', () => purge.stop())
}

export default fp(tokenPurge, { name: 'token-purge', dependencies: ['database'] })
