import { sql } from 'kysely'
import { inTransaction, isUniqueViolation } from '../database.js'
import { ApiError, emailNotFound, emailTaken, preconditionFailed, refused } from '../lib/errors.js'
import { normalizeAddress } from '../lib/text.js'
import { locksRows, type Db } from './sql.js'
import { lockUser, touchUser, type Expected } from './users.js'

export interface EmailRow {
  id: number
  user_id: number
  address: string
  primary_user_id: number | null
  version: number
  created_at: number
}

const columns = ['id', 'user_id', 'address', 'primary_user_id', 'version', 'created_at'] as const

export function listEmails(db: Db, userId: number, afterId: number, limit: number): Promise<EmailRow[]> {
  return db.selectFrom('emails').select(columns)
    .where('user_id', '=', userId).where('id', '>', afterId)
    .orderBy('id').limit(limit + 1).execute()
}

/** An address, reached only under its own user: another user's address id is simply not found. */
export function findEmail(db: Db, userId: number, emailId: number): Promise<EmailRow | undefined> {
  return db.selectFrom('emails').select(columns).where('id', '=', emailId).where('user_id', '=', userId).executeTakeFirst()
}

export function findPrimaryEmail(db: Db, userId: number): Promise<EmailRow | undefined> {
  return db.selectFrom('emails').select(columns).where('primary_user_id', '=', userId).executeTakeFirst()
}

function mustMatch(row: { version: number }, expected: Expected) {
  if (Array.isArray(expected) && !expected.includes(row.version)) throw preconditionFailed()
}

/** Runs a write that may hit the unique address index: the index decides races, its refusal is EMAIL_TAKEN. */
async function claimingAddress<T>(address: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (err) {
    if (isUniqueViolation(err)) throw emailTaken(address)
    throw err
  }
}

async function lockedEmail(trx: Db, userId: number, where: { id: number } | 'primary'): Promise<EmailRow | undefined> {
  let q = trx.selectFrom('emails').select(columns).where('user_id', '=', userId)
  q = where === 'primary' ? q.where('primary_user_id', '=', userId) : q.where('id', '=', where.id)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

async function insertEmail(trx: Db, userId: number, address: string, primary: boolean, now: number): Promise<number> {
  const result = await trx.insertInto('emails').values({
    user_id: userId,
    address,
    address_norm: normalizeAddress(address),
    primary_user_id: primary ? userId : null,
    version: 1,
    created_at: now,
    updated_at: now
  }).executeTakeFirstOrThrow()
  return Number(result.insertId)
}

async function countEmails(trx: Db, userId: number): Promise<number> {
  const row = await trx.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', userId).executeTakeFirstOrThrow()
  return Number(row.n)
}

/** Adds an address to a user; the first one becomes primary. EMAIL_LIMIT past `max` addresses. */
export async function addEmail(db: Db, userId: number, address: string, max: number): Promise<EmailRow> {
  return claimingAddress(address, () => inTransaction(db, async (trx) => {
    await lockUser(trx, userId)
    const count = await countEmails(trx, userId)
    if (count >= max) throw new ApiError(409, 'EMAIL_LIMIT', `A user may have at most ${max} addresses`)
    const now = Date.now()
    const emailId = await insertEmail(trx, userId, address, count === 0, now)
    if (count === 0) await touchUser(trx, userId, now)
    return written(trx, userId, emailId)
  }))
}

/** The row as this transaction left it: read inside it, so a concurrent delete cannot take it away first. */
async function written(trx: Db, userId: number, emailId: number): Promise<EmailRow> {
  const row = await findEmail(trx, userId, emailId)
  if (!row) throw new Error(`address ${emailId} vanished inside its own transaction`)
  return row
}

/** Changes an address in place (same id). Changing the primary changes the user's representation too. */
export async function updateEmail(db: Db, userId: number, emailId: number, address: string, expected: Expected): Promise<EmailRow> {
  return claimingAddress(address, () => inTransaction(db, async (trx) => {
    await lockUser(trx, userId)
    const row = await lockedEmail(trx, userId, { id: emailId })
    if (!row) throw emailNotFound(`User ${userId} has no address with id ${emailId}`)
    mustMatch(row, expected)
    await rewriteAddress(trx, row, address)
    return written(trx, userId, emailId)
  }))
}

async function rewriteAddress(trx: Db, row: EmailRow, address: string): Promise<void> {
  const now = Date.now()
  await trx.updateTable('emails')
    .set({ address, address_norm: normalizeAddress(address), version: sql`version + 1`, updated_at: now })
    .where('id', '=', row.id).execute()
  if (row.primary_user_id !== null) await touchUser(trx, row.user_id, now)
}

/**
 * Places an address at the single-address path: replaces the primary in place (same id), or creates it when the
 * user has none. `created` tells which.
 */
export async function putPrimaryEmail(
  db: Db, userId: number, address: string, expected: Expected, max: number
): Promise<{ row: EmailRow; created: boolean }> {
  return claimingAddress(address, () => inTransaction(db, async (trx) => {
    await lockUser(trx, userId)
    const primary = await lockedEmail(trx, userId, 'primary')
    if (primary) {
      mustMatch(primary, expected)
      await rewriteAddress(trx, primary, address)
      return { row: await written(trx, userId, primary.id), created: false }
    }
    // No primary means no address at all: each user with an address has exactly one primary.
    if (Array.isArray(expected) || expected === 'any') throw preconditionFailed()
    if (max < 1) throw new ApiError(409, 'EMAIL_LIMIT', `A user may have at most ${max} addresses`)
    const now = Date.now()
    const id = await insertEmail(trx, userId, address, true, now)
    await touchUser(trx, userId, now)
    return { row: await written(trx, userId, id), created: true }
  }))
}

/**
 * Removes an address. Removing the primary promotes the oldest remaining address; removing the last one is
 * EMAIL_REQUIRED while `requireEmail` holds.
 */
export async function deleteEmail(
  db: Db, userId: number, target: { id: number } | 'primary', expected: Expected, requireEmail: boolean
): Promise<void> {
  await inTransaction(db, async (trx) => {
    await lockUser(trx, userId)
    const row = await lockedEmail(trx, userId, target)
    if (!row) {
      throw emailNotFound(target === 'primary' ? `User ${userId} has no address` : `User ${userId} has no address with id ${target.id}`)
    }
    mustMatch(row, expected)
    const count = await countEmails(trx, userId)
    if (count <= 1 && requireEmail) {
      throw refused('EMAIL_REQUIRED', 'A user must keep at least one address')
    }
    await trx.deleteFrom('emails').where('id', '=', row.id).execute()
    if (row.primary_user_id === null) return
    const now = Date.now()
    const oldest = await trx.selectFrom('emails').select('id').where('user_id', '=', userId)
      .orderBy('created_at').orderBy('id').limit(1).executeTakeFirst()
    if (oldest) {
      await trx.updateTable('emails')
        .set({ primary_user_id: userId, version: sql`version + 1`, updated_at: now })
        .where('id', '=', oldest.id).execute()
    }
    await touchUser(trx, userId, now)
  })
}
