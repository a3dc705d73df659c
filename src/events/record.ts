import { monotonicFactory } from 'ulidx'
import type { Actor, EventType } from '../../schemas/event.js'
import type { Trx } from '../database/index.js'

/** What caused a change: who made it, through which request, and where the links of its resources point. */
export interface Cause {
  actor: Actor
  /** The request's X-Request-Id; null for the service's own changes. */
  requestId: string | null
  /** PUBLIC_URL or '': the base of every href in an event's data, as in the answers. */
  base: string
  /** Told each time an event is written for this cause (the request wakes the sequencer once it is answered). */
  recorded?: () => void
  /** The hash of the access token the request came with: a write a revert could race checks it again (stillSignedIn). */
  token?: string
}

/** A change the service makes by itself (the first admin at start, expiry), outside any request. */
export const systemCause = (base: string): Cause => ({ actor: { type: 'system', id: null }, requestId: null, base })

/** The same cause with another actor: a login is made by the user it signs in, whoever sent it. */
export const asActor = (cause: Cause, actor: Actor): Cause => ({ ...cause, actor })

/** A JSON object, as the presenters make them. */
type Fields = object

const nextUlid = monotonicFactory()

/**
 * The fields of `before` whose values differ in `after`, with their values before: `previous` of an update event.
 * Compared by their JSON, as a client would see them.
 */
export function changedFields(before: Fields, after: Fields): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const was = before as Record<string, unknown>
  const now = after as Record<string, unknown>
  for (const key of Object.keys(was)) {
    if (JSON.stringify(was[key]) !== JSON.stringify(now[key])) out[key] = was[key]
  }
  return out
}

/** An event's row, as every writer of one makes it; it gets its place in the feed once committed (sequencer.ts). */
function eventRow(cause: Cause, type: EventType, userId: number | null, data: Fields, previous: Fields | null, now: number) {
  return {
    public_id: `evt_${nextUlid()}`, type, user_id: userId, actor_type: cause.actor.type, actor_id: cause.actor.id,
    request_id: cause.requestId, data: JSON.stringify(data), previous: previous === null ? null : JSON.stringify(previous),
    occurred_at: now, position: null
  }
}

/**
 * Writes one event in the transaction of the change it records: it exists if, and only if, the change commits.
 * `data` and `previous` are what the API presents (never a secret: no password, hash, token or code reaches a
 * presenter).
 */
export async function recordEvent(
  trx: Trx, cause: Cause, type: EventType, userId: number | null, data: Fields, previous: Fields | null = null
): Promise<void> {
  await trx.insertInto('events').values(eventRow(cause, type, userId, data, previous, Date.now())).execute()
  cause.recorded?.()
}

/** Several events of one cause, in one statement (an import's new users): as recordEvent writes each. */
export async function recordEvents(trx: Trx, cause: Cause, events: Array<{ type: EventType; userId: number | null; data: Fields }>): Promise<void> {
  if (events.length === 0) return
  const now = Date.now()
  await trx.insertInto('events').values(events.map(({ type, userId, data }) => eventRow(cause, type, userId, data, null, now))).execute()
  cause.recorded?.()
}

/** The event of a user's deletion: erased from the start (its user is forgotten), it tells only who was deleted. */
export async function recordDeletion(trx: Trx, cause: Cause, userId: number): Promise<void> {
  await trx.insertInto('events').values({ ...eventRow(cause, 'user.deleted', userId, {}, null, Date.now()), erased: 1 }).execute()
  cause.recorded?.()
}
