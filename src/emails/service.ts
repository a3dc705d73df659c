import { EmailLimit, EmailRequired, emailNotFound, userNotFound, VersionConflict } from '../common/errors.js'
import { mustMatch, type Expected } from '../common/versions.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { lockUser, touchUser, userExists } from '../users/repository.js'
import {
  countEmails, deleteEmailRow, findEmail, findPrimaryEmail, insertEmail, listEmails, lockEmail, markPrimary,
  oldestEmailId, rewriteAddress, type EmailRow, type EmailTarget
} from './repository.js'

export interface EmailsOptions {
  /** Addresses a user may hold (MAX_EMAILS_PER_USER). */
  maxPerUser: number
  /** A user's last address cannot be removed (REQUIRE_EMAIL). */
  requireEmail: boolean
}

const missing = (userId: number, target: EmailTarget) =>
  emailNotFound(target === 'primary' ? `User ${userId} has no address` : `User ${userId} has no address with id ${target.id}`)

/** The row as this transaction left it: read inside it, so a concurrent delete cannot take it away first. */
async function written(trx: Trx, userId: number, emailId: number): Promise<EmailRow> {
  const row = await findEmail(trx, userId, emailId)
  if (!row) throw new Error(`address ${emailId} vanished inside its own transaction`)
  return row
}

/**
 * The rules about a user's addresses: how many, which is primary, which may go. Every write locks the user row
 * first, so writes to one user's addresses are serialised and the count and primary checks hold.
 */
export class EmailsService {
  constructor(private readonly db: Db, private readonly options: EmailsOptions) {}

  /** USER_NOT_FOUND when the user itself is missing, else EMAIL_NOT_FOUND: asked only once something was not found. */
  private async notFound(userId: number, target: EmailTarget): Promise<never> {
    throw (await userExists(this.db, userId)) ? missing(userId, target) : userNotFound(`id ${userId}`)
  }

  async list(userId: number, afterId: number, limit: number): Promise<EmailRow[]> {
    const rows = await listEmails(this.db, userId, afterId, limit)
    // An empty first page is also how a missing user looks: only then ask which it is.
    if (rows.length === 0 && afterId === 0 && !(await userExists(this.db, userId))) throw userNotFound(`id ${userId}`)
    return rows
  }

  async get(userId: number, target: EmailTarget): Promise<EmailRow> {
    const row = target === 'primary' ? await findPrimaryEmail(this.db, userId) : await findEmail(this.db, userId, target.id)
    return row ?? this.notFound(userId, target)
  }

  /** Adds an address to a user; the first one becomes primary. EMAIL_LIMIT past the limit, EMAIL_TAKEN if anyone's. */
  add(userId: number, address: string): Promise<EmailRow> {
    return inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      const count = await countEmails(trx, userId)
      if (count >= this.options.maxPerUser) throw new EmailLimit(this.options.maxPerUser)
      const now = Date.now()
      const emailId = await insertEmail(trx, userId, address, count === 0, now)
      if (count === 0) await touchUser(trx, userId, now)
      return written(trx, userId, emailId)
    })
  }

  /** Changes an address in place (same id). Changing the primary changes the user's representation too. */
  update(userId: number, emailId: number, address: string, expected: Expected): Promise<EmailRow> {
    return inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      const row = await lockEmail(trx, userId, { id: emailId })
      if (!row) throw missing(userId, { id: emailId })
      mustMatch(row.version, expected)
      await this.rewrite(trx, row, address)
      return written(trx, userId, emailId)
    })
  }

  /**
   * Places an address at the single-address path: replaces the primary in place (same id), or creates it when the
   * user has none. `created` tells which.
   */
  placePrimary(userId: number, address: string, expected: Expected): Promise<{ row: EmailRow; created: boolean }> {
    return inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      const primary = await lockEmail(trx, userId, 'primary')
      if (primary) {
        mustMatch(primary.version, expected)
        await this.rewrite(trx, primary, address)
        return { row: await written(trx, userId, primary.id), created: false }
      }
      // No primary means no address at all: each user with an address has exactly one primary. An If-Match
      // names a version of an address that does not exist.
      if (expected !== undefined) throw new VersionConflict()
      const now = Date.now()
      const id = await insertEmail(trx, userId, address, true, now)
      await touchUser(trx, userId, now)
      return { row: await written(trx, userId, id), created: true }
    })
  }

  /**
   * Removes an address. Removing the primary promotes the oldest remaining address; removing the last one is
   * EMAIL_REQUIRED while REQUIRE_EMAIL holds.
   */
  async remove(userId: number, target: EmailTarget, expected: Expected): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      await lockUser(trx, userId)
      const row = await lockEmail(trx, userId, target)
      if (!row) throw missing(userId, target)
      mustMatch(row.version, expected)
      if (this.options.requireEmail && (await countEmails(trx, userId)) <= 1) throw new EmailRequired()
      await deleteEmailRow(trx, row.id)
      if (row.primary_user_id === null) return
      const now = Date.now()
      const oldest = await oldestEmailId(trx, userId)
      if (oldest !== undefined) await markPrimary(trx, oldest, userId, now)
      await touchUser(trx, userId, now)
    })
  }

  private async rewrite(trx: Trx, row: EmailRow, address: string): Promise<void> {
    const now = Date.now()
    await rewriteAddress(trx, row.id, address, now)
    if (row.primary_user_id !== null) await touchUser(trx, row.user_id, now)
  }
}
