import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { eraseBatch, pendingErasures } from '../accounts/erasure.js'
import { deleteIfDue, dueDeletions } from '../accounts/removal.js'
import { Repeating } from '../common/repeating.js'
import { inTransaction } from '../database/transaction.js'

export interface DeletionOptions {
  /** Between two turns. */
  everyMs: number
  /** Events erased by one transaction. */
  eraseBatch?: number
}

/** Deletions made final, and users whose events are erased, in one turn at most; the next turn takes the rest. */
const BATCH = 100
/** Erasure batches in one turn at most: a close waits for the turn under way, never for a whole erasure. */
const ERASURES_PER_TURN = 100

/**
 * The deletions' background work, every PURGE_INTERVAL_SECONDS and at least twice a minute, from the moment the app
 * is ready until it closes: scheduled deletions whose grace has ended are made final (`user.deleted`, actor
 * `system`), each in its own transaction that deletes only a user still scheduled and due, so several instances may
 * look at once; then the events of deleted users are erased, one short transaction per batch.
 */
async function deletions(app: FastifyInstance, options: Partial<DeletionOptions>): Promise<void> {
  const { everyMs, eraseBatch: batch } = { everyMs: Math.min(app.config.PURGE_INTERVAL_SECONDS, 30) * 1000, ...options }
  const base = app.config.PUBLIC_URL ?? ''
  const turn = new Repeating(everyMs, async () => {
    const now = Date.now()
    let deleted = false
    for (const id of await dueDeletions(app.db, now, BATCH)) {
      deleted = (await inTransaction(app.db, (trx) => deleteIfDue(trx, id, now, base))) || deleted
    }
    if (deleted) app.sequencer.wake()
    let budget = ERASURES_PER_TURN
    for (const userId of await pendingErasures(app.db, BATCH)) {
      while (budget-- > 0 && await eraseBatch(app.db, userId, batch) > 0) { /* the next batch */ }
    }
  }, (err) => app.log.warn({ err }, 'users: scheduled deletions or erasures could not be made; trying again'))
  app.addHook('onReady', async () => turn.start())
  app.addHook('preClose', () => turn.stop())
}

export default fp(deletions, { name: 'deletions', dependencies: ['database', 'events'] })
