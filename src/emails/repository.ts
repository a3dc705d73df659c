import { EMAIL_COLUMNS, claiming, type EmailRow } from '../accounts/addresses.js'
import { foldedKey } from '../common/text.js'
import type { Db, Trx } from '../database/index.js'

export function listEmails(db: Db, userId: number, afterId: number, limit: number): Promise<EmailRow[]> {
  return db.selectFrom('emails').select(EMAIL_COLUMNS)
    .where('user_id', '=', userId).where('id', '>', afterId)
    .orderBy('id').limit(limit + 1).execute()
}

export function findPrimaryEmail(db: Db, userId: number): Promise<EmailRow | undefined> {
  return db.selectFrom('emails').select(EMAIL_COLUMNS).where('primary_user_id', '=', userId).executeTakeFirst()
}

/**
 * Changes an address in place (same id, new version). A new mailbox (not merely other letter case) is a new,
 * unverified claim. EMAIL_TAKEN when any user has the new one.
 */
export async function rewriteAddress(trx: Trx, emailId: number, address: string, now: number, newMailbox: boolean): Promise<void> {
  await claiming(address, trx.updateTable('emails')
    .set((eb) => ({
      address, address_norm: foldedKey(address), version: eb('version', '+', 1), updated_at: now,
      ...(newMailbox ? { verified_at: null, claimed_at: now } : {})
    }))
    .where('id', '=', emailId).execute())
}

export async function countEmails(trx: Trx, userId: number): Promise<number> {
  const row = await trx.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', userId).executeTakeFirstOrThrow()
  return Number(row.n)
}
