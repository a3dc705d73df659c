import type { SessionEndReason } from '../../schemas/event.js'
import { Unauthenticated } from '../common/errors.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'
import { recordEvent, type Cause } from '../events/record.js'
import { presentSession } from './present.js'
import type { SessionRow } from './rows.js'

export type { SessionRow }

export const SESSION_COLUMNS = ['id', 'user_id', 'created_at', 'last_used_at', 'expires_at', 'client'] as const

/** One `session.ended` event per session, saying why, before the sessions go. */
export async function recordEnded(trx: Trx, cause: Cause, rows: SessionRow[], reason: SessionEndReason): Promise<void> {
  for (const row of rows) {
    await recordEvent(trx, cause, 'session.ended', row.user_id, { ...presentSession(row, cause.base, null), reason })
  }
}

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
 * locked the user row, so no login or refresh can add a session in between. The sessions' rows are locked (MySQL)
 * before their tokens are deleted: every writer takes a session's row before its tokens (the purge too, which takes
 * no user lock), so none waits on another in the opposite order.
 */
export async function endSessions(trx: Trx, userId: number, cause: Cause, reason: SessionEndReason, keep?: Keep): Promise<void> {
  let sessions = trx.selectFrom('sessions').select(SESSION_COLUMNS).where('user_id', '=', userId)
  if (keep?.sessionId) sessions = sessions.where('id', '!=', keep.sessionId)
  if (locksRows(trx)) sessions = sessions.forUpdate()
  const rows = await sessions.execute()
  await recordEnded(trx, cause, rows, reason)
  await deleteSessions(trx, rows.map((r) => r.id))
  let legacy = trx.deleteFrom('tokens').where('user_id', '=', userId).where('session_id', 'is', null)
  if (keep && keep.sessionId === null) legacy = legacy.where('token_hash', '!=', keep.tokenHash)
  await legacy.execute()
}

/**
 * UNAUTHENTICATED unless the token the change was asked with still stands, read under the user's lock: a change that
 * ended the user's sessions (a revert) while this request was on its way holds, and is not undone by it.
 */
export async function stillSignedIn(trx: Trx, cause: Cause): Promise<void> {
  if (cause.token === undefined) return
  const row = await trx.selectFrom('tokens').select('id').where('token_hash', '=', cause.token).executeTakeFirst()
  if (!row) throw new Unauthenticated('The session ended while this request was on its way')
}

/** Ends one session of a user (its row locked before its tokens, as in endSessions); whether there was one. */
export async function endSession(trx: Trx, userId: number, sessionId: number, cause: Cause, reason: SessionEndReason): Promise<boolean> {
  let query = trx.selectFrom('sessions').select(SESSION_COLUMNS).where('id', '=', sessionId).where('user_id', '=', userId)
  if (locksRows(trx)) query = query.forUpdate()
  const row = await query.executeTakeFirst()
  if (!row) return false
  await recordEnded(trx, cause, [row], reason)
  await deleteSessions(trx, [row.id])
  return true
}

/** When a session was signed in (by password or e-mail code: refreshes keep it); undefined when it is gone. */
export async function sessionSignedInAt(db: Db, sessionId: number): Promise<number | undefined> {
  return (await db.selectFrom('sessions').select('created_at').where('id', '=', sessionId).executeTakeFirst())?.created_at
}
