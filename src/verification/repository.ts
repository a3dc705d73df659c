import type { EmailTokenPurpose } from '../../db/types.js'
import { addressLookupKey } from '../common/text.js'
import { EMAIL_COLUMNS } from '../accounts/addresses.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

/** When the last token of this purpose was mailed to the address, if one still exists. */
export async function lastTokenAt(trx: Trx, emailId: number, purpose: EmailTokenPurpose): Promise<number | undefined> {
  const row = await trx.selectFrom('email_tokens').select('created_at')
    .where('email_id', '=', emailId).where('purpose', '=', purpose)
    .orderBy('created_at', 'desc').limit(1).executeTakeFirst()
  return row?.created_at
}

/** A token with the address it was mailed to, as it stands now. */
export function findEmailToken(db: Db | Trx, hash: string, purpose: EmailTokenPurpose) {
  return db.selectFrom('email_tokens')
    .innerJoin('emails', 'emails.id', 'email_tokens.email_id')
    .select(['email_tokens.id', 'email_tokens.email_id', 'email_tokens.user_id', 'email_tokens.expires_at', 'emails.verified_at'])
    .where('email_tokens.token_hash', '=', hash).where('email_tokens.purpose', '=', purpose)
    .executeTakeFirst()
}

/** Drops a user's tokens of one purpose (a reset used spends every reset token of the user). */
export async function deleteUserTokens(trx: Trx, userId: number, purpose: EmailTokenPurpose): Promise<void> {
  await trx.deleteFrom('email_tokens').where('user_id', '=', userId).where('purpose', '=', purpose).execute()
}

/**
 * Where a password reset for an address may be mailed: the address if it is its user's primary or verified, and
 * the user active. Undefined otherwise, and for an address nobody has.
 */
export async function findResetTarget(db: Db, address: string) {
  const key = addressLookupKey(address)
  if (key === undefined) return undefined
  return db.selectFrom('emails')
    .innerJoin('users', 'users.id', 'emails.user_id')
    .select(['emails.id', 'emails.user_id', 'emails.address'])
    .where('emails.address_norm', '=', key)
    .where('users.status', '=', 'ACTIVE')
    .where('users.deletion_scheduled_at', 'is', null)
    .where((eb) => eb.or([eb('emails.primary_user_id', 'is not', null), eb('emails.verified_at', 'is not', null)]))
    .executeTakeFirst()
}

/** An address by its text (case-insensitively), whoever holds it: where a code is tried. */
export async function findAddress(db: Db, address: string): Promise<{ id: number; user_id: number } | undefined> {
  const key = addressLookupKey(address)
  if (key === undefined) return undefined
  return db.selectFrom('emails').select(['id', 'user_id']).where('address_norm', '=', key).executeTakeFirst()
}

const REVERT_COLUMNS = ['id', 'user_id', 'address', 'code_hash', 'created_at', 'expires_at'] as const

/** A revert by its token's hash, as it stands. */
export function findRevert(db: Db | Trx, hash: string) {
  return db.selectFrom('email_reverts').select(REVERT_COLUMNS).where('token_hash', '=', hash).executeTakeFirst()
}

/** The reverts mailed to an address (its folded text) whose codes are live: unexpired, fewer than `tries` wrong tries. */
export function liveReverts(db: Db | Trx, addressNorm: string, now: number, tries: number) {
  return db.selectFrom('email_reverts').select(REVERT_COLUMNS)
    .where('address_norm', '=', addressNorm).where('expires_at', '>', now).where('code_tries', '<', tries)
    .orderBy('user_id').execute()
}

/** One more wrong try for each of these reverts' codes. */
export async function addRevertTries(trx: Trx, ids: number[]): Promise<void> {
  if (ids.length) await trx.updateTable('email_reverts').set((eb) => ({ code_tries: eb('code_tries', '+', 1) })).where('id', 'in', ids).execute()
}

/**
 * Drops the reverts of a user written at or after `since`: the one used and those of the changes it undoes. Older
 * ones stay, so that a revert of a later change cannot spend the one that undoes an earlier change.
 */
export async function deleteRevertsSince(trx: Trx, userId: number, since: number): Promise<void> {
  await trx.deleteFrom('email_reverts').where('user_id', '=', userId).where('created_at', '>=', since).execute()
}

/** Every address of a user with when it was last set, locked (MySQL), oldest first. */
export function lockUserAddresses(trx: Trx, userId: number) {
  let q = trx.selectFrom('emails').select([...EMAIL_COLUMNS, 'claimed_at']).where('user_id', '=', userId).orderBy('id')
  if (locksRows(trx)) q = q.forUpdate()
  return q.execute()
}

/** When the user's password was last set after sign-up, if it was. */
export async function passwordSetAt(trx: Trx, userId: number): Promise<number | null | undefined> {
  const row = await trx.selectFrom('users').select('password_set_at').where('id', '=', userId).executeTakeFirst()
  return row?.password_set_at
}
