import type { Insertable } from 'kysely'
import type { SessionsTable } from '../../db/types.js'
import type { Db, Trx } from '../database/index.js'
import { addressLookupKey } from '../common/text.js'
import { locksRows } from '../database/transaction.js'
import { deleteSessions, recordEnded, SESSION_COLUMNS as columns, type SessionRow } from '../accounts/sessions.js'
import type { Cause } from '../events/record.js'

export type { SessionRow }

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

/**
 * Before a new session: drops the user's expired sessions (ended already: no event), and ends its oldest live ones
 * past `max - 1` (`session.ended`, reason `session_limit`).
 */
export async function makeRoom(trx: Trx, userId: number, now: number, max: number, cause: Cause): Promise<void> {
  const rows = await trx.selectFrom('sessions').select([...columns, 'ends_at']).where('user_id', '=', userId).orderBy('id').execute()
  const expired = rows.filter((r) => r.expires_at <= now || r.ends_at <= now)
  const live = rows.filter((r) => r.expires_at > now && r.ends_at > now)
  const excess = live.slice(0, Math.max(0, live.length - (max - 1)))
  await recordEnded(trx, cause, excess, 'session_limit')
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

export async function insertToken(trx: Trx, userId: number, sessionId: number, hash: string, now: number, expiresAt: number): Promise<void> {
  await trx.insertInto('tokens').values({ token_hash: hash, user_id: userId, session_id: sessionId, created_at: now, expires_at: expiresAt }).execute()
}

/**
 * What a password is checked against: the user owning an address that may log in, its primary address or any of
 * its verified ones. An unverified secondary address finds nobody, as an unknown one does.
 */
export function findCredentials(db: Db, address: string) {
  return db
    .selectFrom('emails')
    .innerJoin('users', 'users.id', 'emails.user_id')
    .select(['users.id', 'users.password_hash', 'users.status'])
    .where('emails.address_norm', '=', addressLookupKey(address) ?? '')
    .where((eb) => eb.or([eb('emails.primary_user_id', 'is not', null), eb('emails.verified_at', 'is not', null)]))
    .executeTakeFirst()
}

export async function deleteToken(db: Db | Trx, hash: string): Promise<void> {
  await db.deleteFrom('tokens').where('token_hash', '=', hash).execute()
}

/** Drops a user's expired access tokens (refused anyway), at each of its logins, so they cannot pile up. */
export async function purgeExpiredAccessTokens(trx: Trx, userId: number, now: number): Promise<void> {
  await trx.deleteFrom('tokens').where('user_id', '=', userId).where('expires_at', '<=', now).execute()
}

/**
 * What a token may be issued against, read with the user row locked (MySQL) for the rest of the transaction: every
 * change that ends sessions (a new password, a ban, a demotion, a deletion) writes this row first, so a login or
 * refresh and such a change are serialised, and a token is issued only against the state the change left.
 */
export async function lockCredentials(trx: Trx, userId: number) {
  let q = trx.selectFrom('users').select(['id', 'password_hash', 'status']).where('id', '=', userId)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

/** Where a sign-in code may sign in: a primary or verified address, with its user. */
export function findSignInAddress(db: Db, address: string) {
  return db
    .selectFrom('emails')
    .select(['emails.id', 'emails.user_id'])
    .where('emails.address_norm', '=', addressLookupKey(address) ?? '')
    .where((eb) => eb.or([eb('emails.primary_user_id', 'is not', null), eb('emails.verified_at', 'is not', null)]))
    .executeTakeFirst()
}
