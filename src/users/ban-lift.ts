import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { endedBans, liftEndedBan } from '../accounts/bans.js'
import { Repeating } from '../common/repeating.js'
import { inTransaction } from '../database/transaction.js'

export interface BanLiftOptions {
  /** Between two looks for bans that have reached their end. */
  everyMs: number
}

/** Bans lifted in one turn at most; the next turn takes the rest. */
const BATCH = 100

/**
 * Bans with an end are lifted by the service itself once the end has come (`user.status_changed`, actor `system`),
 * whether or not the user signs in: every PURGE_INTERVAL_SECONDS, and at least twice a minute, from the moment the
 * app is ready until it closes. Each lift is its own short transaction that writes only if the ban still stands, so
 * several instances may look at once and each lift is written once.
 */
async function banLift(app: FastifyInstance, options: Partial<BanLiftOptions>): Promise<void> {
  const { everyMs } = { everyMs: Math.min(app.config.PURGE_INTERVAL_SECONDS, 30) * 1000, ...options }
  const base = app.config.PUBLIC_URL ?? ''
  const lift = new Repeating(everyMs, async () => {
    const now = Date.now()
    let lifted = false
    for (const id of await endedBans(app.db, now, BATCH)) {
      lifted = (await inTransaction(app.db, (trx) => liftEndedBan(trx, id, now, base))) || lifted
    }
    if (lifted) app.sequencer.wake()
  }, (err) => app.log.warn({ err }, 'users: bans past their end could not be lifted; trying again'))
  app.addHook('onReady', async () => lift.start())
  app.addHook('preClose', () => lift.stop())
}

export default fp(banLift, { name: 'ban-lift', dependencies: ['database', 'events'] })
