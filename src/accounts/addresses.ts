import { sql } from 'kysely'
import { EmailTaken } from '../common/errors.js'
import { foldedKey, sameMailbox } from '../common/text.js'
import { isUniqueViolation } from '../database/errors.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'
import { changedFields, recordEvent, type Cause } from '../events/record.js'
import { deleteEmailTokens, heldByRevert } from './address-tokens.js'
import { presentEmail } from './present.js'
import type { EmailRow } from './rows.js'
import { lockUser, touchUser } from './users.js'

export type { EmailRow }

/** One address of a user, by its id, or the user's primary one. */
export type EmailTarget = { id: number } | 'primary'

export const EMAIL_COLUMNS = ['id', 'user_id', 'address', 'primary_user_id', 'version', 'created_at', 'verified_at'] as const

/** An address, reached only under its own user: another user's address id is simply not found. */
export function findEmail(db: Db | Trx, userId: number, emailId: number): Promise<EmailRow | undefined> {
  return db.selectFrom('emails').select(EMAIL_COLUMNS).where('id', '=', emailId).where('user_id', '=', userId).executeTakeFirst()
}

/** An address locked for the rest of the transaction (MySQL). */
export function lockEmail(trx: Trx, userId: number, target: EmailTarget): Promise<EmailRow | undefined> {
  let q = trx.selectFrom('emails').select(EMAIL_COLUMNS).where('user_id', '=', userId)
  q = target === 'primary' ? q.where('primary_user_id', '=', userId) : q.where('id', '=', target.id)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

/** Runs a write that may hit the unique address index: the index decides races, its refusal is EMAIL_TAKEN. */
export async function claiming<T>(address: string, write: Promise<T>): Promise<T> {
  try {
    return await write
  } catch (err) {
    if (isUniqueViolation(err)) throw new EmailTaken(address)
    throw err
  }
}

/** Inserts an address, unverified unless `verified`; its id. EMAIL_TAKEN when any user has it. */
export async function insertEmail(
  trx: Trx, userId: number, address: string, primary: boolean, now: number, verified = false
): Promise<number> {
  const result = await claiming(address, trx.insertInto('emails').values({
    user_id: userId,
    address,
    address_norm: foldedKey(address),
    primary_user_id: primary ? userId : null,
    version: 1,
    created_at: now,
    updated_at: now,
    verified_at: verified ? now : null,
    claimed_at: now
  }).executeTakeFirstOrThrow())
  return Number(result.insertId)
}

/** Marks an address verified (new version). */
export async function markVerified(trx: Trx, emailId: number, now: number): Promise<void> {
  await trx.updateTable('emails')
    .set((eb) => ({ verified_at: now, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', emailId).execute()
}

/**
 * Reading mail sent to an address proved it: its verification tokens are spent, and it is marked verified
 * (`email.verified`) unless it was already. Read under the caller's lock of the user. The address as it is now.
 */
export async function verifyAddress(trx: Trx, userId: number, emailId: number, now: number, cause: Cause): Promise<EmailRow> {
  const before = await findEmail(trx, userId, emailId)
  if (!before) throw new Error(`address ${emailId} vanished inside its own transaction`)
  await deleteEmailTokens(trx, emailId, 'verify')
  if (before.verified_at !== null) return before
  await markVerified(trx, emailId, now)
  const after = { ...before, verified_at: now, version: before.version + 1 }
  const shown = presentEmail(after, cause.base)
  await recordEvent(trx, cause, 'email.verified', userId, shown, changedFields(presentEmail(before, cause.base), shown))
  return after
}

export async function deleteEmailRow(trx: Trx, emailId: number): Promise<void> {
  await trx.deleteFrom('emails').where('id', '=', emailId).execute()
}

export async function deleteUserEmails(trx: Trx, userId: number): Promise<void> {
  await trx.deleteFrom('emails').where('user_id', '=', userId).execute()
}

/** Marks an address as its user's primary (the user must have none at that moment: the index is unique). */
export async function markPrimary(trx: Trx, emailId: number, userId: number, now: number): Promise<void> {
  await trx.updateTable('emails')
    .set((eb) => ({ primary_user_id: userId, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', emailId).execute()
}

/** Stops an address being its user's primary (new version); another may then be marked. */
export async function unmarkPrimary(trx: Trx, emailId: number, now: number): Promise<void> {
  await trx.updateTable('emails')
    .set((eb) => ({ primary_user_id: null, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', emailId).execute()
}

/**
 * Makes `row` its user's primary address (`email.primary_changed`, with the former primary in `previous`); the user's
 * representation changes. Under the caller's lock of the user. The former primary, if there was one.
 */
export async function makePrimary(trx: Trx, row: EmailRow, now: number, cause: Cause): Promise<EmailRow | undefined> {
  const userId = row.user_id
  const former = await lockEmail(trx, userId, 'primary')
  // The index allows one primary per user: the former one is unmarked first.
  if (former) await unmarkPrimary(trx, former.id, now)
  await markPrimary(trx, row.id, userId, now)
  await touchUser(trx, userId, now)
  await recordEvent(trx, cause, 'email.primary_changed', userId, presentEmail({ ...row, primary_user_id: userId }, cause.base),
    former ? { email_id: former.id, address: former.address } : null)
  return former
}

/**
 * Takes an address's verified mark away (`email.changed`), with its live tokens: it can no longer receive a
 * password reset or a sign-in code unless it is proved again.
 */
export async function unverifyAddress(trx: Trx, row: EmailRow, now: number, cause: Cause): Promise<void> {
  await deleteEmailTokens(trx, row.id)
  if (row.verified_at === null) return
  await trx.updateTable('emails').set((eb) => ({ verified_at: null, version: eb('version', '+', 1), updated_at: now })).where('id', '=', row.id).execute()
  const shown = presentEmail({ ...row, verified_at: null, version: row.version + 1 }, cause.base)
  await recordEvent(trx, cause, 'email.changed', row.user_id, shown, changedFields(presentEmail(row, cause.base), shown))
}

/** An address by its text, whoever holds it, locked for the rest of the transaction (MySQL). */
export function lockAddress(trx: Trx, address: string): Promise<EmailRow | undefined> {
  let q = trx.selectFrom('emails').select(EMAIL_COLUMNS).where('address_norm', '=', foldedKey(address))
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

/**
 * After a user's primary address `former` went: its oldest verified remaining address (else its oldest, version
 * 1's rule for a user with no verified address left) becomes primary (`email.primary_changed`), and the user's
 * representation changes. The address made primary, if any is left.
 */
export async function promoteOldest(trx: Trx, former: EmailRow, now: number, cause: Cause): Promise<EmailRow | undefined> {
  const userId = former.user_id
  const oldest = await trx.selectFrom('emails').select(EMAIL_COLUMNS).where('user_id', '=', userId)
    .orderBy(sql`case when verified_at is null then 1 else 0 end`).orderBy('created_at').orderBy('id').limit(1).executeTakeFirst()
  if (oldest) {
    await markPrimary(trx, oldest.id, userId, now)
    await recordEvent(trx, cause, 'email.primary_changed', userId, presentEmail({ ...oldest, primary_user_id: userId }, cause.base),
      { email_id: former.id, address: former.address })
  }
  await touchUser(trx, userId, now)
  return oldest
}

/**
 * Removes an address (`email.removed`, with the address as it was), promoting another if it was the primary: the
 * address promoted, if any.
 */
export async function removeEmail(trx: Trx, row: EmailRow, cause: Cause): Promise<EmailRow | undefined> {
  await deleteEmailRow(trx, row.id)
  await recordEvent(trx, cause, 'email.removed', row.user_id, presentEmail(row, cause.base))
  return row.primary_user_id === null ? undefined : promoteOldest(trx, row, Date.now(), cause)
}

/** The address's row if it is an unverified claim set at or before `cutoff` (a stale claim), locked (MySQL). */
async function findStaleClaim(trx: Trx, address: string, cutoff: number): Promise<EmailRow | undefined> {
  let q = trx.selectFrom('emails').select(EMAIL_COLUMNS)
    .where('address_norm', '=', foldedKey(address))
    .where('verified_at', 'is', null).where('claimed_at', 'is not', null).where('claimed_at', '<=', cutoff)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

/**
 * Runs a write that claims `address` for the user `claimant`: every way an address is added or set goes through
 * here. An address another user holds through a live revert (heldByRevert) is EMAIL_TAKEN. When the unique index
 * refuses the write because another user holds the address as a stale claim (set at or before `cutoff` and never
 * verified), that claim is given up and the write is tried once more: an unverified claim cannot keep an address
 * from its real owner for ever. The former holder loses the address; if it was its primary, its oldest remaining
 * address (verified first) becomes primary.
 */
export async function claimingStale<T>(
  trx: Trx, address: string, claimant: number, cutoff: number, cause: Cause, write: () => Promise<T>
): Promise<T> {
  if (await heldByRevert(trx, address, claimant, Date.now())) throw new EmailTaken(address)
  try {
    return await write()
  } catch (err) {
    if (!(err instanceof EmailTaken)) throw err
    const stale = await findStaleClaim(trx, address, cutoff)
    if (!stale || stale.user_id === claimant) throw err
    // The holder's user row first, then its address, in the order every address write takes them.
    await lockUser(trx, stale.user_id)
    const held = await lockEmail(trx, stale.user_id, { id: stale.id })
    if (!held || held.verified_at !== null || !sameMailbox(held.address, address)) throw err
    await removeEmail(trx, held, cause)
    return write()
  }
}
