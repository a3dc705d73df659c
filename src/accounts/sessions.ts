import type { Trx } from '../database/index.js'

/** Deletes sessions by id with their access and refresh tokens. */
export async function deleteSessions(trx: Trx, ids: number[]): Promise<void> {
  if (ids.length === 0) return
  await trx.deleteFrom('refresh_tokens').where('session_id', 'in', ids).execute()
  await trx.deleteFrom('tokens').where('session_id', 'in', ids).execute()
  await trx.deleteFrom('sessions').where('id', 'in', ids).execute()
}

/** What a revocation spares: the caller's own session, or its token when it has no session (issued before sessions). */
export interface Keep {
  sessionId: number | null
  tokenHash: string
}

/**
 * Ends a user's sessions with all their tokens, and the user's tokens issued before sessions existed: all of them,
 * or all but what `keep` names. Runs in the transaction of the change that causes it, after that change has
 * locked the user row, so no login or refresh can add a session in between.
 */
export async function endSessions(trx: Trx, userId: number, keep?: Keep): Promise<void> {
  let sessions = trx.selectFrom('sessions').select('id').where('user_id', '=', userId)
  if (keep?.sessionId) sessions = sessions.where('id', '!=', keep.sessionId)
  await deleteSessions(trx, (await sessions.execute()).map((r) => r.id))
  let legacy = trx.deleteFrom('tokens').where('user_id', '=', userId).where('session_id', 'is', null)
  if (keep && keep.sessionId === null) legacy = legacy.where('token_hash', '!=', keep.tokenHash)
  await legacy.execute()
}

/** Ends one session of a user; whether there was one. */
export async function endSession(trx: Trx, userId: number, sessionId: number): Promise<boolean> {
  const row = await trx.selectFrom('sessions').select('id').where('id', '=', sessionId).where('user_id', '=', userId).executeTakeFirst()
  if (!row) return false
  await deleteSessions(trx, [row.id])
  return true
}
