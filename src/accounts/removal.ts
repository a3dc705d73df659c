import type { Insertable } from 'kysely'
import type { UsersTable } from '../../db/types.js'
import { LastAdmin, NotFound } from '../common/errors.js'
import { mustMatch, type Expected } from '../common/versions.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'
import { changedFields, recordDeletion, recordEvent, systemCause, type Cause } from '../events/record.js'
import { deleteUserEmailTokens } from './address-tokens.js'
import { deleteUserEmails } from './addresses.js'
import { forgetUser } from './erasure.js'
import { endSessions } from './sessions.js'
import { tallyUsers } from './tally.js'
import { presentUser } from './present.js'
import { lockUserRow, updateUserRow, type UserRow } from './users.js'

// A user's row made and unmade, the same way by the API, imports and SCIM.

/** Inserts a user row; its id. */
export async function insertUser(trx: Trx, values: Insertable<UsersTable>): Promise<number> {
  const inserted = await trx.insertInto('users').values(values).executeTakeFirstOrThrow()
  const id = Number(inserted.insertId)
  await tallyUsers(trx, id, 1)
  return id
}

/**
 * Refuses to leave no active admin (LAST_ADMIN) when the user `id` stops being one. The active admins are locked
 * before the user's own row, in every transaction that can remove one, so two admins demoting each other at once
 * cannot both succeed.
 */
export async function keepAnAdmin(trx: Trx, id: number): Promise<void> {
  let q = trx.selectFrom('users').select('id').where('role', '=', 'admin').where('status', '=', 'ACTIVE')
    .where('deletion_scheduled_at', 'is', null)
  if (locksRows(trx)) q = q.forUpdate()
  const admins = (await q.execute()).map((r) => r.id)
  if (admins.includes(id) && admins.length <= 1) throw new LastAdmin()
}

/** Locks a user for its deletion, in the order every removal takes its locks: the active admins, then its row. */
export async function lockForDeletion(trx: Trx, id: number): Promise<UserRow> {
  await keepAnAdmin(trx, id)
  return lockUserRow(trx, id)
}

/**
 * Deletes a user with its addresses, sessions, tokens and metadata at a version If-Match allows, and forgets it
 * (`user.deleted`, erased; accounts/erasure.ts).
 */
export async function deleteUser(trx: Trx, id: number, expected: Expected, cause: Cause): Promise<void> {
  const row = await lockForDeletion(trx, id)
  mustMatch(row.version, expected)
  await deleteLocked(trx, id, cause)
}

/** Deletes a user `lockForDeletion` locked, and forgets it. */
export async function deleteLocked(trx: Trx, id: number, cause: Cause): Promise<void> {
  await endSessions(trx, id, cause, 'user_deleted')
  await recordDeletion(trx, cause, id)
  const addresses = (await trx.selectFrom('emails').select('address').where('user_id', '=', id).execute()).map((r) => r.address)
  await deleteUserEmails(trx, id)
  await trx.deleteFrom('users').where('id', '=', id).execute()
  await tallyUsers(trx, id, -1)
  await forgetUser(trx, id, addresses, Date.now())
}

/**
 * Schedules a user's deletion for `at`, at a version If-Match allows (`user.deletion_scheduled`): its sessions end
 * and its mailed tokens and codes are spent at once, and it can no longer sign in; its addresses stay held. A user
 * scheduled already stays as it is. The user as it now stands.
 */
export async function scheduleDeletion(trx: Trx, id: number, at: number, expected: Expected, cause: Cause): Promise<UserRow> {
  const before = await lockForDeletion(trx, id)
  mustMatch(before.version, expected)
  if (before.deletion_scheduled_at !== null) return before
  const after = await rewrite(trx, before, at, cause, 'user.deletion_scheduled')
  await endSessions(trx, id, cause, 'deletion_scheduled')
  await deleteUserEmailTokens(trx, id)
  return after
}

/** Takes back a scheduled deletion (`user.restored`); false when none is scheduled. */
export async function restoreUser(trx: Trx, id: number, expected: Expected, cause: Cause): Promise<UserRow | undefined> {
  const before = await lockUserRow(trx, id)
  mustMatch(before.version, expected)
  if (before.deletion_scheduled_at === null) return undefined
  return rewrite(trx, before, null, cause, 'user.restored')
}

async function rewrite(trx: Trx, before: UserRow, at: number | null, cause: Cause, type: 'user.deletion_scheduled' | 'user.restored'): Promise<UserRow> {
  const now = Date.now()
  await updateUserRow(trx, before.id, { deletion_scheduled_at: at, updated_at: now })
  const after: UserRow = { ...before, deletion_scheduled_at: at, version: before.version + 1, updated_at: now }
  const shown = presentUser(after, cause.base)
  await recordEvent(trx, cause, type, before.id, shown, changedFields(presentUser(before, cause.base), shown))
  return after
}

/** The users whose scheduled deletion has come, a batch of them. */
export async function dueDeletions(db: Db, now: number, limit: number): Promise<number[]> {
  const rows = await db.selectFrom('users').select('id').where('deletion_scheduled_at', '<=', now).limit(limit).execute()
  return rows.map((r) => r.id)
}

/**
 * Makes a scheduled deletion final if its time has come (`user.deleted`, actor `system`), read under the row's lock so
 * that a restore, or another instance, in between wins. Whether it deleted the user.
 */
export async function deleteIfDue(trx: Trx, id: number, now: number, base: string): Promise<boolean> {
  // A user restored meanwhile as the last admin, or gone, is not this job's to delete.
  const row = await lockForDeletion(trx, id).catch((err: unknown) => {
    if (err instanceof NotFound || err instanceof LastAdmin) return undefined
    throw err
  })
  if (row === undefined || row.deletion_scheduled_at === null || row.deletion_scheduled_at > now) return false
  await deleteLocked(trx, id, systemCause(base))
  return true
}
