import type { Insertable, Selectable } from 'kysely'
import type { SessionsTable } from '../../db/types.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

export type SessionRow = Pick<Selectable<SessionsTable>, 'id' | 'user_id' | 'created_at' | 'last_used_at' | 'expires_at' | 'client'>

const columns = ['id', 'user_id', 'created_at', 'last_used_at', 'expires_at', 'client'] as const

/** A user's live sessions after `afterId`, in id order, one more than `limit`. */
export function listSessions(db: Db, userId: number, now: number, afterId: number, limit: number): Promise<SessionRow[]> {
  return db.selectFrom('sessions').select(columns)
    .where('user_id', '=', userId).where('expires_at', '>', now).where('id', '>', afterId)
    .orderBy('id').limit(limit + 1).execute()
}

export function findSession(db: Db | Trx, sessionId: number): Promise<SessionRow | undefined> {
  return db.selectFrom('sessions').select(columns).where('id', '=', sessionId).executeTakeFirst()
}

export async function insertSession(trx: Trx, values: Insertable<SessionsTable>): Promise<number> {
  const result = await trx.insertInto('sessions').values(values).executeTakeFirstOrThrow()
  return Number(result.insertId)
}

/** A session renewed by a refresh: used now, alive until `expiresAt`. */
export async function renewSession(trx: Trx, sessionId: number, now: number, expiresAt: number): Promise<void> {
  await trx.updateTable('sessions').set({ last_used_at: now, expires_at: expiresAt }).where('id', '=', sessionId).execute()
}

/** Deletes sessions by id with their access and refresh tokens. */
async function deleteSessions(trx: Trx, ids: number[]): Promise<void> {
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

/** Before a new session: ends the user's expired sessions, and its oldest ones past `max - 1`. */
export async function makeRoom(trx: Trx, userId: number, now: number, max: number): Promise<void> {
  const rows = await trx.selectFrom('sessions').select(['id', 'expires_at', 'ends_at']).where('user_id', '=', userId).orderBy('id').execute()
  const expired = rows.filter((r) => r.expires_at <= now || r.ends_at <= now)
  const live = rows.filter((r) => r.expires_at > now && r.ends_at > now)
  const excess = live.slice(0, Math.max(0, live.length - (max - 1)))
  await deleteSessions(trx, [...expired, ...excess].map((r) => r.id))
}

export interface RefreshRow {
  id: number
  session_id: number
  user_id: number
  expires_at: number
  used_at: number | null
  session_expires_at: number
  ends_at: number
}

/** A refresh token by its hash, with its session; locked for the rest of the transaction when `lock` (MySQL). */
export function findRefresh(db: Db | Trx, hash: string, lock = false): Promise<RefreshRow | undefined> {
  let q = db.selectFrom('refresh_tokens')
    .innerJoin('sessions', 'sessions.id', 'refresh_tokens.session_id')
    .select([
      'refresh_tokens.id', 'refresh_tokens.session_id', 'sessions.user_id', 'refresh_tokens.expires_at', 'refresh_tokens.used_at',
      'sessions.expires_at as session_expires_at', 'sessions.ends_at'
    ])
    .where('refresh_tokens.token_hash', '=', hash)
  if (lock && locksRows(db)) q = q.forUpdate()
  return q.executeTakeFirst()
}

export async function insertRefresh(trx: Trx, sessionId: number, hash: string, now: number, expiresAt: number): Promise<void> {
  await trx.insertInto('refresh_tokens').values({ token_hash: hash, session_id: sessionId, created_at: now, expires_at: expiresAt, used_at: null }).execute()
}

/** Spends a refresh token; false when it was spent already. */
export async function spendRefresh(trx: Trx, id: number, now: number): Promise<boolean> {
  const result = await trx.updateTable('refresh_tokens').set({ used_at: now }).where('id', '=', id).where('used_at', 'is', null).executeTakeFirst()
  return result.numUpdatedRows > 0n
}
