import { NotFound, userNotFound } from '../common/errors.js'
import type { Db } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { lockUser, userExists } from '../users/repository.js'
import { endSession, endSessions, listSessions, type SessionRow } from './repository.js'

/** Seeing and ending sessions ("sign out everywhere"). Route rules have decided who may reach the user. */
export class SessionsService {
  constructor(private readonly db: Db) {}

  async list(userId: number, afterId: number, limit: number): Promise<SessionRow[]> {
    const rows = await listSessions(this.db, userId, Date.now(), afterId, limit)
    if (rows.length === 0 && afterId === 0 && !(await userExists(this.db, userId))) throw userNotFound(`id ${userId}`)
    return rows
  }

  /** Ends one session: its access and refresh tokens stop working at once. */
  async end(userId: number, sessionId: number): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      if (!(await endSession(trx, userId, sessionId))) throw new NotFound('SESSION_NOT_FOUND', `User ${userId} has no session with id ${sessionId}`)
    })
  }

  /** Ends every session of the user, the caller's included. */
  async endAll(userId: number): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      await endSessions(trx, userId)
    })
  }
}
