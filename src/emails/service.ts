import type { EmailChange } from '../../schemas/email.js'
import type { AddressMail, MailSlot } from '../accounts/address-mail.js'
import { deleteEmailTokens } from '../accounts/address-tokens.js'
import {
  claimingStale, findEmail, insertEmail, lockEmail, makePrimary, removeEmail, type EmailRow, type EmailTarget
} from '../accounts/addresses.js'
import { presentEmail } from '../accounts/present.js'
import { stillSignedIn } from '../accounts/sessions.js'
import { lockUser, pageOfUser, touchUser, userExists } from '../accounts/users.js'
import { EmailLimit, EmailRequired, EmailUnverified, emailNotFound, invalidField, userNotFound, VersionConflict } from '../common/errors.js'
import { sameMailbox } from '../common/text.js'
import { mustMatch, type Expected } from '../common/versions.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction, written } from '../database/transaction.js'
import { changedFields, recordEvent, type Cause } from '../events/record.js'
import { countEmails, findPrimaryEmail, listEmails, rewriteAddress } from './repository.js'

export interface EmailsOptions {
  /** Addresses a user may hold (MAX_EMAILS_PER_USER). */
  maxPerUser: number
  /** A user's last address cannot be removed (REQUIRE_EMAIL). */
  requireEmail: boolean
  /** An unverified address set this long ago may be taken by another user (UNVERIFIED_CLAIM_SECONDS). */
  claimSeconds: number
}

const missing = (userId: number, target: EmailTarget) =>
  emailNotFound(target === 'primary' ? `User ${userId} has no address` : `User ${userId} has no address with id ${target.id}`)

/** The row as this transaction left it: read inside it, so a concurrent delete cannot take it away first. */
async function writtenEmail(trx: Trx, userId: number, emailId: number): Promise<EmailRow> {
  return written(await findEmail(trx, userId, emailId), `address ${emailId}`)
}

/**
 * The user locked, and the caller's token checked under that lock: a revert that ended the session while the request
 * was on its way wins, and the write is refused.
 */
async function lockSignedIn(trx: Trx, userId: number, cause: Cause): Promise<void> {
  await lockUser(trx, userId)
  await stillSignedIn(trx, cause)
}

/**
 * The rules about a user's addresses: how many, which is primary, which may go. Every write locks the user row
 * first, so writes to one user's addresses are serialised and the count and primary checks hold.
 */
export class EmailsService {
  constructor(private readonly db: Db, private readonly mail: AddressMail, private readonly options: EmailsOptions) {}

  private claimCutoff(now: number): number {
    return now - this.options.claimSeconds * 1000
  }

  /** A write transaction that may have written mail: the deliverer is told once it committed. */
  private async mailing<T>(fn: (trx: Trx) => Promise<T>): Promise<T> {
    const result = await inTransaction(this.db, fn)
    this.mail.committed()
    return result
  }

  /** USER_NOT_FOUND when the user itself is missing, else EMAIL_NOT_FOUND: asked only once something was not found. */
  private async notFound(userId: number, target: EmailTarget): Promise<never> {
    throw (await userExists(this.db, userId)) ? missing(userId, target) : userNotFound(`id ${userId}`)
  }

  async list(userId: number, afterId: number, limit: number): Promise<EmailRow[]> {
    return pageOfUser(this.db, userId, afterId, await listEmails(this.db, userId, afterId, limit))
  }

  async get(userId: number, target: EmailTarget): Promise<EmailRow> {
    const row = target === 'primary' ? await findPrimaryEmail(this.db, userId) : await findEmail(this.db, userId, target.id)
    return row ?? this.notFound(userId, target)
  }

  /**
   * Adds an address to a user, unverified, and mails it a verification token; the first one becomes primary.
   * EMAIL_LIMIT past the limit, EMAIL_TAKEN if anyone's (unless a stale claim, given up). Mail limits: AddressMail.
   */
  async add(userId: number, address: string, client: string | null, cause: Cause): Promise<EmailRow> {
    await this.mail.allow(client)
    return this.mail.withSlot(userId, address, (slot) => this.mailing(async (trx) => {
      await lockSignedIn(trx, userId, cause)
      const count = await countEmails(trx, userId)
      if (count >= this.options.maxPerUser) throw new EmailLimit(this.options.maxPerUser)
      const now = Date.now()
      const emailId = await claimingStale(trx, address, userId, this.claimCutoff(now), cause,
        () => insertEmail(trx, userId, address, count === 0, now))
      if (count === 0) await touchUser(trx, userId, now)
      await this.mail.verification(trx, { id: emailId, user_id: userId, address }, now, slot)
      const added = await writtenEmail(trx, userId, emailId)
      await recordEvent(trx, cause, 'email.added', userId, presentEmail(added, cause.base))
      return added
    }))
  }

  /**
   * Changes an address in place (same id), makes it primary, or both. A new mailbox is unverified and mailed a
   * verification token; only a verified address may become primary (EMAIL_UNVERIFIED), and the former primary is
   * told by mail. Changing the primary changes the user's representation too.
   */
  async update(userId: number, emailId: number, change: EmailChange, expected: Expected, client: string | null, cause: Cause): Promise<EmailRow> {
    // A new mailbox is mailed a verification, a new primary tells the former one: either counts as mail asked for.
    if (change.address !== undefined || change.primary === true) await this.mail.allow(client)
    // The slot is given exactly when an address is (below): only a new address can cause a verification mail.
    const run = (slot?: MailSlot) => this.mailing(async (trx) => {
      await lockSignedIn(trx, userId, cause)
      let row = await lockEmail(trx, userId, { id: emailId })
      if (!row) throw missing(userId, { id: emailId })
      mustMatch(row.version, expected)
      if (change.address !== undefined && slot) row = await this.rewrite(trx, row, change.address, slot, cause)
      if (change.primary === false && row.primary_user_id !== null) {
        throw invalidField('/primary', 'body', 'cannot be false for the primary address: make another address primary instead')
      }
      if (change.primary === true && row.primary_user_id === null) {
        if (row.verified_at === null) throw new EmailUnverified()
        const now = Date.now()
        const former = await makePrimary(trx, row, now, cause)
        if (former) await this.mail.primaryChanged(trx, former, row.address, now)
      }
      return writtenEmail(trx, userId, emailId)
    })
    return change.address === undefined ? run() : this.mail.withSlot(userId, change.address, run)
  }

  /**
   * Places an address at the single-address path: replaces the primary in place (same id), or creates it when the
   * user has none. `created` tells which.
   */
  async placePrimary(
    userId: number, address: string, expected: Expected, client: string | null, cause: Cause
  ): Promise<{ row: EmailRow; created: boolean }> {
    await this.mail.allow(client)
    return this.mail.withSlot(userId, address, (slot) => this.mailing(async (trx) => {
      await lockSignedIn(trx, userId, cause)
      const primary = await lockEmail(trx, userId, 'primary')
      if (primary) {
        mustMatch(primary.version, expected)
        return { row: await this.rewrite(trx, primary, address, slot, cause), created: false }
      }
      // No primary means no address at all: each user with an address has exactly one primary. An If-Match
      // names a version of an address that does not exist.
      if (expected !== undefined) throw new VersionConflict()
      const now = Date.now()
      const id = await claimingStale(trx, address, userId, this.claimCutoff(now), cause, () => insertEmail(trx, userId, address, true, now))
      await touchUser(trx, userId, now)
      await this.mail.verification(trx, { id, user_id: userId, address }, now, slot)
      const added = await writtenEmail(trx, userId, id)
      await recordEvent(trx, cause, 'email.added', userId, presentEmail(added, cause.base))
      return { row: added, created: true }
    }))
  }

  /**
   * Removes an address. Removing the primary promotes the oldest verified remaining address (else the oldest), a
   * change of primary like any other: the former primary is mailed a revert and held for the user meanwhile
   * (AddressMail). Removing the last one is EMAIL_REQUIRED while REQUIRE_EMAIL holds.
   */
  async remove(userId: number, target: EmailTarget, expected: Expected, cause: Cause): Promise<void> {
    await this.mailing(async (trx) => {
      await lockSignedIn(trx, userId, cause)
      const row = await lockEmail(trx, userId, target)
      if (!row) throw missing(userId, target)
      mustMatch(row.version, expected)
      if (this.options.requireEmail && (await countEmails(trx, userId)) <= 1) throw new EmailRequired()
      const promoted = await removeEmail(trx, row, cause)
      if (promoted) await this.mail.primaryChanged(trx, row, promoted.address, Date.now())
    })
  }

  /**
   * Writes a new text for an address. Another mailbox (not merely other letter case) is a new claim: unverified,
   * its old tokens dead, a verification mail sent; for the primary, the former address is mailed as for a change of
   * primary. The address as written (`email.changed`, with what it replaced).
   */
  private async rewrite(trx: Trx, row: EmailRow, address: string, slot: MailSlot, cause: Cause): Promise<EmailRow> {
    const now = Date.now()
    const newMailbox = !sameMailbox(address, row.address)
    await claimingStale(trx, address, row.user_id, this.claimCutoff(now), cause, () => rewriteAddress(trx, row.id, address, now, newMailbox))
    if (row.primary_user_id !== null) await touchUser(trx, row.user_id, now)
    if (newMailbox) {
      await deleteEmailTokens(trx, row.id)
      await this.mail.verification(trx, { id: row.id, user_id: row.user_id, address }, now, slot)
      // The primary replaced: its former address is told, and may take the change back (AddressMail).
      if (row.primary_user_id !== null) await this.mail.primaryChanged(trx, row, address, now)
    }
    const after = await writtenEmail(trx, row.user_id, row.id)
    const shown = presentEmail(after, cause.base)
    await recordEvent(trx, cause, 'email.changed', row.user_id, shown, changedFields(presentEmail(row, cause.base), shown))
    return after
  }
}
