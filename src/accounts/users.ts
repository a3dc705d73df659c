import type { Selectable, Updateable } from 'kysely'
import type { UsersTable } from '../../db/types.js'
import { userNotFound } from '../common/errors.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

/**
 * The columns of a user as every feature reads it, its primary address joined: declared once, for the listings,
 * the single reads and the caller read with each token (auth/caller.ts), so a new column reaches all of them.
 */
export const USER_COLUMNS = [
  'users.id', 'users.name', 'emails.address as email', 'users.status', 'users.role',
  'users.version', 'users.created_at', 'users.updated_at',
  'users.ban_reason', 'users.banned_until', 'users.banned_at', 'users.banned_by_type', 'users.banned_by_id',
  'users.deletion_scheduled_at', 'users.external_id'
] as const

/** The ban's columns of a user row: all null unless the user is banned. */
export type BanColumns = Pick<Selectable<UsersTable>, 'ban_reason' | 'banned_until' | 'banned_at' | 'banned_by_type' | 'banned_by_id'>

export const NO_BAN: BanColumns = { ban_reason: null, banned_until: null, banned_at: null, banned_by_type: null, banned_by_id: null }

/** A user as read with its primary address (null when it has none). */
export type UserRow = Pick<Selectable<UsersTable>, 'id' | 'name' | 'status' | 'role' | 'version' | 'created_at' | 'updated_at' | 'deletion_scheduled_at' | 'external_id'> & BanColumns & {
  email: string | null
}

export { bannedAt } from './rows.js'

/** Users with their primary address: one indexed join on the unique primary marker. */
export function selectUsers(db: Db | Trx) {
  return db.selectFrom('users').leftJoin('emails', 'emails.primary_user_id', 'users.id').select(USER_COLUMNS)
}

export function findUserById(db: Db | Trx, id: number): Promise<UserRow | undefined> {
  return selectUsers(db).where('users.id', '=', id).executeTakeFirst()
}

export async function userExists(db: Db | Trx, id: number): Promise<boolean> {
  return (await db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst()) !== undefined
}

/**
 * A page of a user's rows, unless the user is missing: an empty first page is also how a missing user looks, so only
 * then is the user looked up (USER_NOT_FOUND).
 */
export async function pageOfUser<R>(db: Db, userId: number, afterId: number, rows: R[]): Promise<R[]> {
  if (rows.length === 0 && afterId === 0 && !(await userExists(db, userId))) throw userNotFound(`id ${userId}`)
  return rows
}

/** Applies changes to a user and bumps its version; the caller has locked the row and checked If-Match. */
export async function updateUserRow(trx: Trx, id: number, changes: Updateable<UsersTable>): Promise<void> {
  await trx.updateTable('users').set((eb) => ({ ...changes, version: eb('version', '+', 1) })).where('id', '=', id).execute()
}

/**
 * Locks a user row for the rest of the transaction (MySQL); USER_NOT_FOUND when there is no such user. Every write
 * to a user's rows (its addresses, sessions and tokens) takes this lock first, so writes to one user serialise and
 * take their locks in one order.
 */
export async function lockUser(trx: Trx, id: number): Promise<Pick<UserRow, 'version' | 'role'>> {
  let q = trx.selectFrom('users').select(['version', 'role']).where('id', '=', id)
  if (locksRows(trx)) q = q.forUpdate()
  const row = await q.executeTakeFirst()
  if (!row) throw userNotFound(`id ${id}`)
  return row
}

/**
 * The user as it stands, locked for the rest of the transaction (MySQL), with its primary address (locked with it):
 * what a change reads before writing, to check If-Match and to tell the values it replaces. USER_NOT_FOUND when
 * there is no such user.
 */
export async function lockUserRow(trx: Trx, id: number): Promise<UserRow> {
  const q = selectUsers(trx).where('users.id', '=', id)
  const row = await (locksRows(trx) ? q.forUpdate() : q).executeTakeFirst()
  if (!row) throw userNotFound(`id ${id}`)
  return row
}

/** Marks a user's representation as changed (its primary address moved): new version, new ETag. */
export async function touchUser(trx: Trx, id: number, now: number): Promise<void> {
  await trx.updateTable('users').set((eb) => ({ version: eb('version', '+', 1), updated_at: now })).where('id', '=', id).execute()
}
