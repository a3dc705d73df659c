import type { Selectable } from 'kysely'
import type { EventsTable } from '../../db/types.js'
import type { Event } from '../../schemas/event.js'
import { isoTimestamp } from '../common/timestamps.js'

/** An event's columns as the feed and the webhooks read them (its feed position aside). */
export const EVENT_COLUMNS = ['id', 'public_id', 'type', 'user_id', 'actor_type', 'actor_id', 'request_id', 'data', 'previous', 'occurred_at', 'erased'] as const

export type EventRow = Pick<Selectable<EventsTable>, (typeof EVENT_COLUMNS)[number]>

/**
 * An event as the feed shows it and webhooks receive it: `data` and `previous` as they were presented when it happened,
 * or, once its user was deleted, erased.
 */
export function presentEvent(row: EventRow): Event {
  const event: Event = {
    id: row.public_id,
    type: row.type,
    occurred_at: isoTimestamp(row.occurred_at),
    user_id: row.user_id,
    actor: { type: row.actor_type, id: row.actor_id },
    request_id: row.request_id,
    // Written by this service from its own presenters (record.ts): JSON objects.
    data: JSON.parse(row.data) as Event['data'],
    previous: row.previous === null ? null : (JSON.parse(row.previous) as NonNullable<Event['previous']>)
  }
  return row.erased === 1 ? erasedEvent(event) : event
}

/** An event as it is once its user was deleted: its skeleton, `data` `{}` and `previous` null. */
export function erasedEvent(event: Event): Event {
  return { ...event, data: {}, previous: null, erased: true }
}

/** An event as a plain user may see it: never `private` metadata, in `data` or in `previous`, whatever the type. */
export function withoutPrivate(event: Event): Event {
  const { private: _data, ...data } = event.data as Record<string, unknown>
  if (event.previous === null) return { ...event, data }
  const { private: _previous, ...previous } = event.previous as Record<string, unknown>
  return { ...event, data, previous }
}
