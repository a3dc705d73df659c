import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Href, Id, Limit, Timestamp } from './common.js'
import { Email } from './email.js'
import { ref, stringEnum } from './ref.js'
import { Metadata } from './metadata.js'
import { Session } from './session.js'
import { User } from './user.js'

/** Every event type: the only place they are written (the database, the feed's filter and the webhooks read these). */
export const EVENT_TYPES = [
  'user.created', 'user.updated', 'user.status_changed', 'user.role_changed', 'user.deleted',
  'email.added', 'email.changed', 'email.verified', 'email.removed', 'email.primary_changed',
  'password.changed', 'password.reset', 'session.created', 'session.ended', 'login.failed', 'users.exported',
  'user.metadata_changed', 'user.deletion_scheduled', 'user.restored'
] as const

export const EventType = stringEnum(EVENT_TYPES, { $id: 'EventType', description: 'What changed' })
export type EventType = Static<typeof EventType>

export const ACTOR_TYPES = ['user', 'admin', 'anonymous', 'system', 'scim'] as const
export type ActorType = (typeof ACTOR_TYPES)[number]

export const Actor = Type.Object(
  {
    type: stringEnum(ACTOR_TYPES, { description: 'user: the user itself; admin: an admin (id); anonymous: a request without a caller (sign-up, a mailed token, a refresh token); system: the service itself; scim: an identity provider through SCIM (id: its SCIM token)' }),
    id: Type.Union([Id, Type.Null()], { description: 'The user or admin who made the change, or the SCIM token; null for anonymous and system' })
  },
  { $id: 'Actor', description: 'Who made the change' }
)
export type Actor = Static<typeof Actor>

/** Why a session ended (`data.reason` of `session.ended`). */
export const SESSION_END_REASONS = [
  'signed_out', 'revoked', 'replay_detected', 'password_changed', 'password_reset', 'banned', 'demoted', 'user_deleted', 'session_limit',
  'primary_reverted', 'deletion_scheduled'
] as const
export type SessionEndReason = (typeof SESSION_END_REASONS)[number]

/** An event's id: also its place in the feed (`after`) and its deliveries' `webhook-id`. */
const EVENT_ID_PATTERN = '^evt_[0-9A-HJKMNP-TV-Z]{26}$'
export const EventId = Type.String({ pattern: EVENT_ID_PATTERN, description: 'evt_ and a ULID' })

/** An event type, or a family of them (`user.*`). */
const TypeFilter = Type.String({ pattern: '^(user|users|email|password|session|login)\\.([a-z_]+|\\*)$', maxLength: 40 })

export const Event = Type.Object(
  {
    id: EventId,
    type: ref(EventType),
    occurred_at: Timestamp,
    user_id: Type.Union([Id, Type.Null()], { description: 'The user the event is about' }),
    actor: ref(Actor),
    request_id: Type.Union([Type.String(), Type.Null()], { description: 'The X-Request-Id of the request that caused it; null for the service\'s own changes' }),
    data: Type.Object({}, {
      additionalProperties: true,
      description: 'The resource as the API presents it after the change: a User, an E-mail, a Metadata (user.metadata_changed; `private` only to admins), or a Session with `reason` (session.ended); for user.deleted and email.removed, as it was just before; for login.failed, `{ email, client }`'
    }),
    previous: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
      description: 'The changed fields\' values before the change; null for a creation or a removal. For email.primary_changed, `{ email_id, address }` of the former primary; for user.metadata_changed, per part the changed keys\' former values (null: absent before)'
    }),
    erased: Type.Optional(Type.Literal(true, { description: 'Present once its user was deleted: `data` is `{}` and `previous` null, the rest kept' }))
  },
  { $id: 'Event', description: 'One change, written in the transaction that made it; it never holds a password, token, code or their hashes' }
)
export type Event = Static<typeof Event>

export const EventCollection = Type.Object(
  {
    href: Href,
    items: Type.Array(ref(Event)),
    next: Type.Union([Type.String(), Type.Null()], { description: 'Link to the next page; null on the page that reaches the newest event' })
  },
  { $id: 'EventCollection', description: 'A page of events' }
)

export const EventQuery = Type.Object(
  {
    type: Type.Optional(Type.Array(TypeFilter, { maxItems: 20, description: 'Repeatable: a type (user.created) or a family (user.*)' })),
    user_id: Type.Optional(Type.Integer({ ...Id, description: 'Only the events about this user (a user id)' })),
    after: Type.Optional(Type.String({ pattern: EVENT_ID_PATTERN, description: 'The id of the last event seen (as `next` links carry it): the page starts after it' })),
    limit: Limit
  },
  { additionalProperties: false }
)
export type EventQuery = Static<typeof EventQuery>

/** The query of a user's own activity: newest first. */
export const UserEventQuery = Type.Object(
  {
    type: EventQuery.properties.type,
    after: Type.Optional(Type.String({ pattern: EVENT_ID_PATTERN, description: 'The id of the last event seen (as `next` links carry it): the page holds the older ones' })),
    limit: Limit
  },
  { additionalProperties: false }
)

/** `data` of `session.ended`: the session as it was, and why it ended. */
export const EndedSession = Type.Object(
  { ...Session.properties, reason: stringEnum(SESSION_END_REASONS, { description: 'signed_out, revoked (by the user or an admin), replay_detected (a spent refresh token presented again), or what ended every session of the user' }) },
  { $id: 'EndedSession', description: 'A session that ended, and why' }
)

/** `data` of `login.failed`: never the password. */
export const FailedLogin = Type.Object(
  { email: Type.String({ description: 'The address the login was tried with' }), client: Type.String({ description: 'The User-Agent of the attempt' }) },
  { $id: 'FailedLogin', description: 'A wrong password for an existing account' }
)

/** `data` of `users.exported`: how many users, and whether their password hashes went with them. */
export const ExportedUsers = Type.Object(
  { count: Type.Integer({ minimum: 0 }), password_hashes: Type.Boolean() },
  { $id: 'ExportedUsers', description: 'An export of every user' }
)

const DATA_OF: Record<EventType, TSchema> = {
  'user.created': ref(User), 'user.updated': ref(User), 'user.status_changed': ref(User), 'user.role_changed': ref(User), 'user.deleted': ref(User),
  'email.added': ref(Email), 'email.changed': ref(Email), 'email.verified': ref(Email), 'email.removed': ref(Email), 'email.primary_changed': ref(Email),
  'password.changed': ref(User), 'password.reset': ref(User),
  'session.created': ref(Session), 'session.ended': ref(EndedSession), 'login.failed': ref(FailedLogin),
  'users.exported': ref(ExportedUsers), 'user.metadata_changed': ref(Metadata),
  'user.deletion_scheduled': ref(User), 'user.restored': ref(User)
}

/** The component name of an event type's schema: `user.created` → `UserCreatedEvent`. */
export const typedEventName = (type: EventType): string =>
  type.split(/[._]/).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('') + 'Event'

/** Each event type with its own payload schema: what the OpenAPI document's `webhooks` section describes, for SDKs. */
export const TypedEvents = EVENT_TYPES.map((type) => Type.Object(
  { ...Event.properties, type: Type.Literal(type), data: DATA_OF[type] },
  { $id: typedEventName(type), description: `The ${type} event, as the feed shows it and webhooks receive it` }
))
