import type { Event } from '../../schemas/event.js'
import type { Db, Trx } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { erasedEvent, type EventRow } from '../events/present.js'

// A deleted user is forgotten. In the deletion's own transaction: its pending mail is dropped, kept idempotent
// answers about it are dropped, and it is listed in `erasures`. Its events, which may be many, are erased afterwards
// in short batches (`eraseBatch`); until then every reader masks them (`maskErasing`), so nothing of the user can be
// read back from the moment the deletion commits.

/** What an erased event keeps of its `data` and `previous`. */
export const ERASED_DATA = '{}'

/** Events erased by one transaction: each batch is short, so other writers never wait on more than one. */
export const ERASE_BATCH = 500

/**
 * Forgets a user inside its deletion's transaction (its addresses, as written, given before they are deleted):
 * mail not yet sent to them is dropped, kept idempotent answers that present the user (each names its user) are
 * dropped, and its events are listed for erasure.
 */
export async function forgetUser(trx: Trx, userId: number, addresses: string[], now: number): Promise<void> {
  if (addresses.length > 0) {
    await trx.deleteFrom('outbox').where('kind', '=', 'mail').where('recipient', 'in', addresses).execute()
  }
  await trx.deleteFrom('idempotency_keys').where('user_id', '=', userId).execute()
  await trx.insertInto('erasures').values({ user_id: userId, created_at: now }).execute()
}

/** Users whose events are still to be erased, oldest deletion first. */
export async function pendingErasures(db: Db, limit: number): Promise<number[]> {
  return (await db.selectFrom('erasures').select('user_id').orderBy('created_at').limit(limit).execute()).map((r) => r.user_id)
}

/**
 * Erases one batch of a deleted user's events in one transaction, with the deliveries that carry them; when none is
 * left, the user leaves `erasures`. How many it erased.
 */
export function eraseBatch(db: Db, userId: number, batch = ERASE_BATCH): Promise<number> {
  return inTransaction(db, async (trx) => {
    const rows = await trx.selectFrom('events').select(['id', 'public_id']).where('user_id', '=', userId).where('erased', '=', 0)
      .orderBy('id').limit(batch).execute()
    if (rows.length === 0) {
      await trx.deleteFrom('erasures').where('user_id', '=', userId).execute()
      return 0
    }
    await trx.updateTable('events').set({ data: ERASED_DATA, previous: null, erased: 1 }).where('id', 'in', rows.map((r) => r.id)).execute()
    const carried = await trx.selectFrom('outbox').select(['id', 'data']).where('kind', '=', 'webhook')
      .where('event_id', 'in', rows.map((r) => r.public_id)).execute()
    for (const delivery of carried) {
      await trx.updateTable('outbox').set({ data: JSON.stringify(erasedEvent(JSON.parse(delivery.data) as Event)) })
        .where('id', '=', delivery.id).execute()
    }
    return rows.length
  })
}

/** Of these users, those whose events are still being erased. */
export async function erasing(db: Db | Trx, userIds: Array<number | null>): Promise<Set<number>> {
  const ids = [...new Set(userIds.filter((id): id is number => id !== null))]
  if (ids.length === 0) return new Set()
  const rows = await db.selectFrom('erasures').select('user_id').where('user_id', 'in', ids).execute()
  return new Set(rows.map((r) => r.user_id))
}

/** Event rows as readers must show them: those of a user still being erased, erased already. */
export async function maskErasing<R extends EventRow>(db: Db | Trx, rows: R[]): Promise<R[]> {
  const pending = await erasing(db, rows.filter((r) => r.erased === 0).map((r) => r.user_id))
  if (pending.size === 0) return rows
  return rows.map((r) => r.user_id !== null && pending.has(r.user_id) ? { ...r, data: ERASED_DATA, previous: null, erased: 1 } : r)
}

/**
 * A delivery's body as it must leave: erased when its event is, or when its user is still being erased. Read from the
 * event as it stands, not from the delivery's copy, which a lane may have claimed before the erasure reached it.
 */
export async function deliveryBody(db: Db, eventId: string | null, data: string): Promise<string> {
  if (eventId === null) return data
  const row = await db.selectFrom('events').leftJoin('erasures', 'erasures.user_id', 'events.user_id')
    .select(['events.erased', 'erasures.user_id as erasing']).where('events.public_id', '=', eventId).executeTakeFirst()
  if (!row || (row.erased === 0 && row.erasing === null)) return data
  return JSON.stringify(erasedEvent(JSON.parse(data) as Event))
}
