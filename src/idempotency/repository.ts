import type { Selectable } from 'kysely'
import type { IdempotencyKeysTable } from '../../db/types.js'
import { isUniqueViolation } from '../database/errors.js'
import type { Db, Trx } from '../database/index.js'
import { deleteInBatches } from '../database/batches.js'
import { inTransaction, locksRows } from '../database/transaction.js'

export type KeyRow = Selectable<IdempotencyKeysTable>

/** Takes a key for a request now running; false when the key is anyone's already (the unique index decides races). */
export async function takeKey(db: Db, keyHash: string, requestHash: string, now: number, expiresAt: number): Promise<boolean> {
  try {
    await db.insertInto('idempotency_keys').values({
      key_hash: keyHash, request_hash: requestHash, state: 'running', status: null, content_type: null,
      location: null, etag: null, body: null, user_id: null, created_at: now, expires_at: expiresAt
    }).execute()
    return true
  } catch (err) {
    if (isUniqueViolation(err)) return false
    throw err
  }
}

export function findKey(db: Db, keyHash: string): Promise<KeyRow | undefined> {
  return db.selectFrom('idempotency_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst()
}

/**
 * Takes over a key whose row is `row` as read (expired, or left running by a request that never answered): only
 * if nobody changed it since, so that of two retries taking it over at once one wins.
 */
export async function takeOver(db: Db, row: KeyRow, requestHash: string, now: number, expiresAt: number): Promise<boolean> {
  const result = await db.updateTable('idempotency_keys')
    .set({ request_hash: requestHash, state: 'running', status: null, content_type: null, location: null, etag: null, body: null, user_id: null, created_at: now, expires_at: expiresAt })
    .where('id', '=', row.id).where('created_at', '=', row.created_at).where('state', '=', row.state)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/**
 * Keeps the first answer under its key. An answer that presents a user is kept only while the user is there, its row
 * locked: a deletion that committed first leaves nothing to keep (the key is freed), and one that comes after finds
 * the answer by its user and drops it.
 */
export async function keepAnswer(
  db: Db, keyHash: string,
  answer: { status: number; contentType: string | null; location: string | null; etag: string | null; body: string; userId: number | null }
): Promise<void> {
  const { userId } = answer
  const keep = (q: Db | Trx) => q.updateTable('idempotency_keys')
    .set({ state: 'done', status: answer.status, content_type: answer.contentType, location: answer.location, etag: answer.etag, body: answer.body, user_id: userId })
    .where('key_hash', '=', keyHash).where('state', '=', 'running').execute()
  if (userId === null) {
    await keep(db)
    return
  }
  await inTransaction(db, async (trx) => {
    let user = trx.selectFrom('users').select('id').where('id', '=', userId)
    if (locksRows(trx)) user = user.forUpdate()
    if (await user.executeTakeFirst()) await keep(trx)
    else await dropKey(trx, keyHash)
  })
}

/** Frees a key whose request failed on the server's side (5xx): a retry runs again. */
export async function dropKey(db: Db | Trx, keyHash: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('key_hash', '=', keyHash).where('state', '=', 'running').execute()
}

export function purgeExpiredKeys(db: Db, now: number, batch: number): Promise<number> {
  return deleteInBatches(
    batch,
    async (limit) => (await db.selectFrom('idempotency_keys').select('id').where('expires_at', '<=', now).limit(limit).execute()).map((r) => r.id),
    // Expired still: a retry may have taken a key over since it was read (a new expiry, running again).
    async (ids) => Number((await db.deleteFrom('idempotency_keys').where('id', 'in', ids).where('expires_at', '<=', now).executeTakeFirst()).numDeletedRows)
  )
}
