/*
 * The single-use tokens mailed to an address (verification, reset, sign-in) and the reverts mailed to a former
 * primary: only their SHA-256 is stored, and their codes' keyed hashes.
 */
import type { EmailTokenPurpose } from '../../db/types.js'
import { foldedKey } from '../common/text.js'
import type { Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

export async function insertEmailToken(
  trx: Trx, values: {
    hash: string; purpose: EmailTokenPurpose; emailId: number; userId: number; now: number; expiresAt: number
    /** The mailed code's keyed hash and expiry (accounts/codes.ts). */
    code: { hash: string; expiresAt: number }
  }
): Promise<void> {
  await trx.insertInto('email_tokens').values({
    token_hash: values.hash, purpose: values.purpose, email_id: values.emailId, user_id: values.userId,
    created_at: values.now, expires_at: values.expiresAt, code_hash: values.code.hash, code_expires_at: values.code.expiresAt
  }).execute()
}

/** Drops an address's tokens (of one purpose, or all): they die when the address changes or is verified. */
export async function deleteEmailTokens(trx: Trx, emailId: number, purpose?: EmailTokenPurpose): Promise<void> {
  let q = trx.deleteFrom('email_tokens').where('email_id', '=', emailId)
  if (purpose) q = q.where('purpose', '=', purpose)
  await q.execute()
}

/** Spends every mailed token and code of a user, whatever its purpose and address. */
export async function deleteUserEmailTokens(trx: Trx, userId: number): Promise<void> {
  await trx.deleteFrom('email_tokens').where('user_id', '=', userId).execute()
}

/** Drops an address's expired tokens, as a new one is issued, so that they cannot pile up. */
export async function purgeExpiredAddressTokens(trx: Trx, emailId: number, now: number): Promise<void> {
  await trx.deleteFrom('email_tokens').where('email_id', '=', emailId).where('expires_at', '<=', now).execute()
}

/** A revert of a primary change, mailed to the former primary `address` of `userId`. */
export async function insertEmailRevert(
  trx: Trx, values: { userId: number; address: string; hash: string; codeHash: string; now: number; expiresAt: number }
): Promise<void> {
  await trx.insertInto('email_reverts').values({
    user_id: values.userId, address: values.address, address_norm: foldedKey(values.address), token_hash: values.hash,
    code_hash: values.codeHash, created_at: values.now, expires_at: values.expiresAt
  }).execute()
}

/** Drops a user's expired reverts, as a new one is written, so that they cannot pile up. */
export async function purgeExpiredReverts(trx: Trx, userId: number, now: number): Promise<void> {
  await trx.deleteFrom('email_reverts').where('user_id', '=', userId).where('expires_at', '<=', now).execute()
}

/**
 * Whether another user than `claimant` holds `address` through a live revert: a former primary stays its user's
 * until the revert expires or is used, removed or not, so that whoever changed the primary cannot hand it to an
 * account of its own. Read locked (MySQL), so that the latest committed revert is seen, not a snapshot's.
 */
export async function heldByRevert(trx: Trx, address: string, claimant: number, now: number): Promise<boolean> {
  let q = trx.selectFrom('email_reverts').select('id')
    .where('address_norm', '=', foldedKey(address)).where('expires_at', '>', now).where('user_id', '!=', claimant)
    .limit(1)
  if (locksRows(trx)) q = q.forUpdate()
  return (await q.executeTakeFirst()) !== undefined
}
