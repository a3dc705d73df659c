import type { Insertable } from 'kysely'
import type { SessionsTable } from '../../db/types.js'
import type { Db, Trx } from '../database/index.js'
import { addressLookupKey } from '../common/text.js'
import { locksRows } from '../database/transaction.js'
import { deleteSessions, recordEnded, SESSION_COLUMNS as columns, type SessionRow } from '../accounts/sessions.js'
import type { Cause } from '../events/record.js'
import { selectUsers, type UserRow } from '../accounts/users.js'

export type { SessionRow }

/** A user's live sessions after `afterId`, in id order, one more than `limit`. */
export function listSessions(db: Db, userId: number, now: number, afterId: number, limit: number): Promise<SessionRow[]> {
  return db.selectFrom('sessions').select(columns)
    .where('user_id', '=', userId).where('expires_at', '>', now).where('id', '>', afterId)
    .orderBy('id').limit(limit + 1).execute()
}

export async function insertSession(trx: Trx, values: Omit<Insertable<SessionsTable>, 'id'>): Promise<number> {
  return Number((await trx.insertInto('sessions').values(values).executeTakeFirstOrThrow()).insertId)
}

/** A session renewed by a refresh: used now, alive until `expiresAt`. */
async function renewSession(trx: Trx, sessionId: number, now: number, expiresAt: number): Promise<void> {
  await trx.updateTable('sessions').set({ last_used_at: now, expires_at: expiresAt }).where('id', '=', sessionId).execute()
}

/** A session of a user as a new session weighs it: alive until `expires_at`, and never past `ends_at`. */
export type HeldSession = SessionRow & { ends_at: number }

/**
 * Before a new session: drops the user's expired sessions (ended already: no event), and ends its oldest live ones
 * past `max - 1` (`session.ended`, reason `session_limit`). `rows` are the user's sessions in id order, as read with
 * its row locked (lockForSession).
 */
export async function makeRoom(trx: Trx, rows: HeldSession[], now: number, max: number, cause: Cause): Promise<void> {
  const expired = rows.filter((r) => r.expires_at <= now || r.ends_at <= now)
  const live = rows.filter((r) => r.expires_at > now && r.ends_at > now)
  const excess = live.slice(0, Math.max(0, live.length - (max - 1)))
  await recordEnded(trx, cause, excess, 'session_limit')
  await deleteSessions(trx, [...expired, ...excess].map((r) => r.id))
}

/** A refresh token with its session, as read before the token is spent. */
export interface RefreshRow {
  id: number
  used_at: number | null
  expires_at: number
  session: SessionRow
  ends_at: number
}

/** A refresh token by its hash, with its session. */
export async function findRefresh(db: Db | Trx, hash: string): Promise<RefreshRow | undefined> {
  const row = await db.selectFrom('refresh_tokens')
    .innerJoin('sessions', 'sessions.id', 'refresh_tokens.session_id')
    .select([
      'refresh_tokens.id', 'refresh_tokens.used_at', 'refresh_tokens.expires_at', 'sessions.id as session_id', 'sessions.user_id',
      'sessions.created_at', 'sessions.last_used_at', 'sessions.expires_at as session_expires_at', 'sessions.client', 'sessions.ends_at'
    ])
    .where('refresh_tokens.token_hash', '=', hash).executeTakeFirst()
  if (!row) return undefined
  return {
    id: row.id, used_at: row.used_at, expires_at: row.expires_at, ends_at: row.ends_at,
    session: {
      id: row.session_id, user_id: row.user_id, created_at: row.created_at, last_used_at: row.last_used_at, expires_at: row.session_expires_at,
      client: row.client
    }
  }
}

/** Whether a refresh token (by id) was spent already: one the spend did not find is spent, or gone with its session. */
export async function refreshSpent(trx: Trx, id: number): Promise<boolean> {
  return (await trx.selectFrom('refresh_tokens').select('id').where('id', '=', id).where('used_at', 'is not', null).executeTakeFirst()) !== undefined
}

export async function insertRefresh(trx: Trx, sessionId: number, hash: string, now: number, expiresAt: number): Promise<void> {
  await trx.insertInto('refresh_tokens')
    .values({ token_hash: hash, session_id: sessionId, created_at: now, expires_at: expiresAt, used_at: null }).execute()
}

/**
 * Spends a refresh token and renews its session (used now, alive until `expiresAt`), both or neither: false when the
 * token was spent already (or is gone). The caller holds the user's lock, which every revocation takes first; within
 * the statement MySQL locks the two rows in the order it chooses (a deadlock with the purge, which takes no user
 * lock, is retried as any other).
 */
export async function spendAndRenew(trx: Trx, tokenId: number, sessionId: number, now: number, expiresAt: number): Promise<boolean> {
  // The engines that lock rows (MySQL, MariaDB) are the ones with a multi-table UPDATE; SQLite updates one table a
  // statement, so it takes two.
  if (!locksRows(trx)) {
    if (!(await spendRefresh(trx, tokenId, now))) return false
    await renewSession(trx, sessionId, now, expiresAt)
    return true
  }
  const result = await trx.updateTable(['refresh_tokens', 'sessions'])
    .set('refresh_tokens.used_at', now).set('sessions.last_used_at', now).set('sessions.expires_at', expiresAt)
    .where('refresh_tokens.id', '=', tokenId).where('refresh_tokens.used_at', 'is', null)
    .where('sessions.id', '=', sessionId).whereRef('sessions.id', '=', 'refresh_tokens.session_id')
    .executeTakeFirst()
  return result.numUpdatedRows > 0n
}

/** Spends a refresh token; false when it was spent already (or is gone). */
export async function spendRefresh(trx: Trx, id: number, now: number): Promise<boolean> {
  const result = await trx.updateTable('refresh_tokens').set({ used_at: now }).where('id', '=', id).where('used_at', 'is', null)
    .executeTakeFirst()
  return result.numUpdatedRows > 0n
}

export async function insertToken(trx: Trx, userId: number, sessionId: number, hash: string, now: number, expiresAt: number): Promise<void> {
  await trx.insertInto('tokens')
    .values({ token_hash: hash, user_id: userId, session_id: sessionId, created_at: now, expires_at: expiresAt }).execute()
}

/**
 * What a password is checked against: the user owning an address that may log in, its primary address or any of
 * its verified ones. An unverified secondary address finds nobody, as an unknown one does.
 */
export function findCredentials(db: Db, address: string) {
  return db.selectFrom('emails')
    .innerJoin('users', 'users.id', 'emails.user_id')
    .select(['users.id', 'users.password_hash', 'users.status', 'users.banned_until'])
    .where('emails.address_norm', '=', addressLookupKey(address) ?? '')
    .where('users.deletion_scheduled_at', 'is', null)
    .where((eb) => eb.or([eb('emails.primary_user_id', 'is not', null), eb('emails.verified_at', 'is not', null)]))
    .executeTakeFirst()
}

/**
 * Replaces a password hash that just checked out with Roster's own, only while it is still the one checked: a password
 * changed meanwhile stays. The password is the same, so neither the version nor the time of the change moves.
 */
export async function replacePasswordHash(trx: Trx, userId: number, checked: string, replacement: string): Promise<void> {
  await trx.updateTable('users').set({ password_hash: replacement }).where('id', '=', userId).where('password_hash', '=', checked).execute()
}

export async function deleteToken(db: Db | Trx, hash: string): Promise<void> {
  await db.deleteFrom('tokens').where('token_hash', '=', hash).execute()
}

/**
 * What a token may be issued against, read with the user row locked (MySQL) for the rest of the transaction: every
 * change that ends sessions (a new password, a ban, a demotion, a deletion) writes this row first, so a login or
 * refresh and such a change are serialised, and a token is issued only against the state the change left. The user
 * as answers show it, with its password hash.
 */
export async function lockCredentials(trx: Trx, userId: number): Promise<(UserRow & { password_hash: string }) | undefined> {
  const q = selectUsers(trx).select('users.password_hash').where('users.id', '=', userId)
  return (locksRows(trx) ? q.forUpdate() : q).executeTakeFirst()
}

/**
 * lockCredentials, and in the same statement the user's sessions in id order (locked with it on MySQL), among which a
 * new session must make room (makeRoom): a sign-in's transaction begins with one statement rather than two. Every
 * other change to a user's sessions locks the user row first, so taking its sessions' rows with it adds no wait.
 */
export async function lockForSession(trx: Trx, userId: number): Promise<{ user: UserRow & { password_hash: string }; sessions: HeldSession[] } | undefined> {
  // The user, its password hash and each of its sessions (none: one row whose session columns are null).
  const q = selectUsers(trx).select('users.password_hash')
    .leftJoin('sessions', 'sessions.user_id', 'users.id')
    .select([
      'sessions.id as session_id', 'sessions.created_at as session_created_at', 'sessions.last_used_at as session_last_used_at',
      'sessions.expires_at as session_expires_at', 'sessions.client as session_client', 'sessions.ends_at as session_ends_at'
    ])
    .where('users.id', '=', userId).orderBy('sessions.id')
  const rows = await (locksRows(trx) ? q.forUpdate() : q).execute()
  const first = rows[0]
  if (!first) return undefined
  const user = {
    id: first.id, name: first.name, email: first.email, status: first.status, role: first.role, version: first.version,
    created_at: first.created_at, updated_at: first.updated_at, password_hash: first.password_hash,
    ban_reason: first.ban_reason, banned_until: first.banned_until, banned_at: first.banned_at,
    banned_by_type: first.banned_by_type, banned_by_id: first.banned_by_id, deletion_scheduled_at: first.deletion_scheduled_at,
    external_id: first.external_id
  }
  const sessions: HeldSession[] = []
  for (const r of rows) {
    // The columns of a joined session are null together, when the user has none.
    if (r.session_id === null || r.session_created_at === null || r.session_last_used_at === null || r.session_expires_at === null ||
      r.session_client === null || r.session_ends_at === null) continue
    sessions.push({
      id: r.session_id, user_id: userId, created_at: r.session_created_at, last_used_at: r.session_last_used_at,
      expires_at: r.session_expires_at, client: r.session_client, ends_at: r.session_ends_at
    })
  }
  return { user, sessions }
}

/** Where a sign-in code may sign in: a primary or verified address, with its user. */
export function findSignInAddress(db: Db, address: string) {
  return db
    .selectFrom('emails')
    .innerJoin('users', 'users.id', 'emails.user_id')
    .select(['emails.id', 'emails.user_id'])
    .where('emails.address_norm', '=', addressLookupKey(address) ?? '')
    .where('users.deletion_scheduled_at', 'is', null)
    .where((eb) => eb.or([eb('emails.primary_user_id', 'is not', null), eb('emails.verified_at', 'is not', null)]))
    .executeTakeFirst()
}
