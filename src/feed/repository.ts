import type { EventType } from '../../schemas/event.js'
import type { Db } from '../database/index.js'
import { EVENT_COLUMNS as COLUMNS, type EventRow } from '../events/present.js'

export type { EventRow }

/** Which types, families (`user.*`) spelt out: undefined for all. */
export type TypeFilter = EventType[] | undefined

/** The feed's place of an event, by its public id; undefined when there is no such event, or it has no place yet. */
export async function positionOf(db: Db, publicId: string): Promise<number | undefined> {
  const row = await db.selectFrom('events').select('position').where('public_id', '=', publicId).executeTakeFirst()
  return row?.position ?? undefined
}

/** The internal id of one of a user's events, by its public id. */
export async function idOf(db: Db, userId: number, publicId: string): Promise<number | undefined> {
  const row = await db.selectFrom('events').select('id').where('public_id', '=', publicId).where('user_id', '=', userId).executeTakeFirst()
  return row?.id
}

/** Placed events after `afterPosition`, in feed order, one more than `limit`. */
export function listFeed(db: Db, filter: { types: TypeFilter; userId?: number | undefined }, afterPosition: number, limit: number) {
  let q = db.selectFrom('events').select([...COLUMNS, 'position']).where('position', '>', afterPosition)
  if (filter.userId !== undefined) q = q.where('user_id', '=', filter.userId)
  const types = filter.types
  if (types) q = q.where('type', 'in', types)
  return q.orderBy('position').limit(limit + 1).execute()
}

/** A user's committed events, newest first, before the event `beforeId` (0: from the newest), one more than `limit`. */
export function listActivity(db: Db, userId: number, types: TypeFilter, beforeId: number, limit: number): Promise<EventRow[]> {
  let q = db.selectFrom('events').select(COLUMNS).where('user_id', '=', userId)
  if (beforeId > 0) q = q.where('id', '<', beforeId)
  if (types) q = q.where('type', 'in', types)
  return q.orderBy('id', 'desc').limit(limit + 1).execute()
}
