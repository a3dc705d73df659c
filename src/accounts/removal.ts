import type { Insertable } from 'kysely'
import type { UsersTable } from '../../db/types.js'
import { LastAdmin } from '../common/errors.js'
import { mustMatch, type Expected } from '../common/versions.js'
import type { Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'
import { recordEvent, type Cause } from '../events/record.js'
import { deleteUserEmails } from './addresses.js'
import { presentUser } from './present.js'
import { endSessions } from './sessions.js'
import { lockUserRow } from './users.js'

// A user's row made and unmade, the same way by the API, imports and SCIM.

/** Inserts a user row; its id. */
export async function insertUser(trx: Trx, values: Insertable<UsersTable>): Promise<number> {
  const inserted = await trx.insertInto('users').values(values).executeTakeFirstOrThrow()
  return Number(inserted.insertId)
}

/**
 * Refuses to leave no active admin (LAST_ADMIN) when the user `id` stops being one. The active admins are locked
 * before the user's own row, in every transaction that can remove one, so two admins demoting each other at once
 * cannot both succeed.
 */
export async function keepAnAdmin(trx: Trx, id: number): Promise<void> {
  let q = trx.selectFrom('users').select('id').where('role', '=', 'admin').where('status', '=', 'ACTIVE')
  if (locksRows(trx)) q = q.forUpdate()
  const admins = (await q.execute()).map((r) => r.id)
  if (admins.includes(id) && admins.length <= 1) throw new LastAdmin()
}

/** Deletes a user with its addresses, sessions and tokens (`user.deleted`, as it was), at a version If-Match allows. */
export async function deleteUser(trx: Trx, id: number, expected: Expected, cause: Cause): Promise<void> {
  await keepAnAdmin(trx, id)
  const row = await lockUserRow(trx, id)
  mustMatch(row.version, expected)
  await recordEvent(trx, cause, 'user.deleted', id, presentUser(row, cause.base))
  await endSessions(trx, id, cause, 'user_deleted')
  await deleteUserEmails(trx, id)
  await trx.deleteFrom('users').where('id', '=', id).execute()
}
