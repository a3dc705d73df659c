import { sql, type Selectable } from 'kysely'
import type { EmailsTable } from '../../db/types.js'
import { EmailTaken } from '../common/errors.js'
import { normalizeAddress } from '../common/text.js'
import { isUniqueViolation } from '../database/errors.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

export type EmailRow = Pick<Selectable<EmailsTable>, 'id' | 'user_id' | 'address' | 'primary_user_id' | 'version' | 'created_at' | 'verified_at'>

/** One address of a user, by its id, or the user's primary one. */
export type EmailTarget = { id: number } | 'primary'

const columns = ['id', 'user_id', 'address', 'primary_user_id', 'version', 'created_at', 'verified_at'] as const

export function listEmails(db: Db, userId: number, afterId: number, limit: number): Promise<EmailRow[]> {
  return db.selectFrom('emails').select(columns)
    .where('user_id', '=', userId).where('id', '>', afterId)
    .orderBy('id').limit(limit + 1).execute()
}

/** An address, reached only under its own user: another user's address id is simply not found. */
export function findEmail(db: Db | Trx, userId: number, emailId: number): Promise<EmailRow | undefined> {
  return db.selectFrom('emails').select(columns).where('id', '=', emailId).where('user_id', '=', userId).executeTakeFirst()
}

export function findPrimaryEmail(db: Db, userId: number): Promise<EmailRow | undefined> {
  return db.selectFrom('emails').select(columns).where('primary_user_id', '=', userId).executeTakeFirst()
}

/** An address locked for the rest of the transaction (MySQL). */
export function lockEmail(trx: Trx, userId: number, target: EmailTarget): Promise<EmailRow | undefined> {
  let q = trx.selectFrom('emails').select(columns).where('user_id', '=', userId)
  q = target === 'primary' ? q.where('primary_user_id', '=', userId) : q.where('id', '=', target.id)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

/** Runs a write that may hit the unique address index: the index decides races, its refusal is EMAIL_TAKEN. */
async function claiming<T>(address: string, write: Promise<T>): Promise<T> {
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
    address_norm: normalizeAddress(address),
    primary_user_id: primary ? userId : null,
    version: 1,
    created_at: now,
    updated_at: now,
    verified_at: verified ? now : null,
    claimed_at: now
  }).executeTakeFirstOrThrow())
  return Number(result.insertId)
}

/**
 * Changes an address in place (same id, new version). A new mailbox (not merely other letter case) is a new,
 * unverified claim. EMAIL_TAKEN when any user has the new one.
 */
export async function rewriteAddress(trx: Trx, emailId: number, address: string, now: number, newMailbox: boolean): Promise<void> {
  await claiming(address, trx.updateTable('emails')
    .set((eb) => ({
      address, address_norm: normalizeAddress(address), version: eb('version', '+', 1), updated_at: now,
      ...(newMailbox ? { verified_at: null, claimed_at: now } : {})
    }))
    .where('id', '=', emailId).execute())
}

/** Marks an address verified (new version). */
export async function markVerified(trx: Trx, emailId: number, now: number): Promise<void> {
  await trx.updateTable('emails')
    .set((eb) => ({ verified_at: now, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', emailId).execute()
}

/** The address's row if it is an unverified claim set at or before `cutoff` (a stale claim), locked (MySQL). */
export async function findStaleClaim(trx: Trx, address: string, cutoff: number): Promise<EmailRow | undefined> {
  let q = trx.selectFrom('emails').select(columns)
    .where('address_norm', '=', normalizeAddress(address))
    .where('verified_at', 'is', null).where('claimed_at', 'is not', null).where('claimed_at', '<=', cutoff)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

/** Stops an address being its user's primary (new version); another may then be marked. */
export async function unmarkPrimary(trx: Trx, emailId: number, now: number): Promise<void> {
  await trx.updateTable('emails')
    .set((eb) => ({ primary_user_id: null, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', emailId).execute()
}

export async function countEmails(trx: Trx, userId: number): Promise<number> {
  const row = await trx.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', userId).executeTakeFirstOrThrow()
  return Number(row.n)
}

export async function deleteEmailRow(trx: Trx, emailId: number): Promise<void> {
  await trx.deleteFrom('emails').where('id', '=', emailId).execute()
}

export async function deleteUserEmails(trx: Trx, userId: number): Promise<void> {
  await trx.deleteFrom('emails').where('user_id', '=', userId).execute()
}

/**
 * The address that becomes primary when the primary goes: the user's oldest verified address, else its oldest
 * (version 1's rule, for a user with no verified address left), if it has any.
 */
export async function oldestEmailId(trx: Trx, userId: number): Promise<number | undefined> {
  const row = await trx.selectFrom('emails').select('id').where('user_id', '=', userId)
    .orderBy(sql`case when verified_at is null then 1 else 0 end`).orderBy('created_at').orderBy('id').limit(1).executeTakeFirst()
  return row?.id
}

/** Marks an address as its user's primary (the user must have none at that moment: the index is unique). */
export async function markPrimary(trx: Trx, emailId: number, userId: number, now: number): Promise<void> {
  await trx.updateTable('emails')
    .set((eb) => ({ primary_user_id: userId, version: eb('version', '+', 1), updated_at: now }))
    .where('id', '=', emailId).execute()
}
