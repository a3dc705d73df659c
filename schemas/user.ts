import { Type, type Static } from '@sinclair/typebox'
import { Address, Cursor, Href, Id, Limit, Name, Password, Timestamp } from './common.js'
import { ref, stringEnum } from './ref.js'

/** The value lists of a user's status and role: the only place they are written (db/types.ts derives from these). */
export const USER_STATUSES = ['ACTIVE', 'BANNED'] as const
export const USER_ROLES = ['user', 'admin'] as const

export const UserStatus = stringEnum(USER_STATUSES, { $id: 'UserStatus', description: 'BANNED users get no token and their tokens stop working' })
export type UserStatus = Static<typeof UserStatus>

export const UserRole = stringEnum(USER_ROLES, { $id: 'UserRole', description: 'Admins may read and change every user' })
export type UserRole = Static<typeof UserRole>

export const Ban = Type.Object(
  {
    reason: Type.Union([Type.String(), Type.Null()], { description: 'Why, as the admin wrote it (`deprovisioned`: by the company\'s directory)' }),
    until: Type.Union([Timestamp, Type.Null()], { description: 'When the ban ends by itself; null: until lifted' }),
    at: Timestamp,
    by: Type.Object({
      type: Type.String({ description: 'admin, scim or system' }),
      id: Type.Union([Id, Type.Null()])
    }, { description: 'Who banned the user' })
  },
  { $id: 'Ban', description: 'A ban: its reason, its end, when and by whom' }
)
export type Ban = Static<typeof Ban>

export const User = Type.Object(
  {
    id: Id,
    href: Href,
    name: Type.String(),
    email: Type.Union([Type.String(), Type.Null()], { description: 'Primary address, or null when the user has none' }),
    status: ref(UserStatus),
    role: ref(UserRole),
    created_at: Timestamp,
    updated_at: Timestamp,
    ban: Type.Union([ref(Ban), Type.Null()], { description: 'Why and until when the user is banned; null when it is not' }),
    deletion_scheduled_at: Type.Union([Timestamp, Type.Null()], { description: 'When the user\'s scheduled deletion becomes final (ACCOUNT_DELETION_GRACE_SECONDS); until then an admin may restore it. Null when none is scheduled' }),
    external_id: Type.Union([Type.String(), Type.Null()], { description: 'The user\'s id in the system it came from (an import\'s external_id, a directory\'s SCIM externalId); null when none' })
  },
  { $id: 'User', description: 'A user; responses may gain fields: clients must ignore the ones they do not know', examples: [{'id': 42, 'href': '/users/42', 'name': 'Ada Lovelace', 'email': 'ada@example.com', 'status': 'ACTIVE', 'role': 'user', 'created_at': '2026-11-21T10:00:00.000Z', 'updated_at': '2026-11-21T10:00:00.000Z'}] }
)
export type User = Static<typeof User>

export const UserCollection = Type.Object(
  {
    href: Href,
    items: Type.Array(ref(User)),
    next: Type.Union([Type.String(), Type.Null()], { description: 'Link to the next page, null on the last' })
  },
  { $id: 'UserCollection', description: 'A page of users; `next` is null on the last page', examples: [{'href': '/users?limit=50', 'items': [{'id': 42, 'href': '/users/42', 'name': 'Ada Lovelace', 'email': 'ada@example.com', 'status': 'ACTIVE', 'role': 'user', 'created_at': '2026-11-21T10:00:00.000Z', 'updated_at': '2026-11-21T10:00:00.000Z'}], 'next': null}] }
)
export type UserCollection = Static<typeof UserCollection>

export const NewUser = Type.Object(
  {
    name: Name,
    email: Address,
    password: Password,
    role: Type.Optional(ref(UserRole)),
    status: Type.Optional(ref(UserStatus))
  },
  { $id: 'NewUser', additionalProperties: false, description: 'A sign-up: `role` and `status` only from an admin', examples: [{ name: 'Ada Lovelace', email: 'ada@example.com', password: 'correct-horse-battery' }] }
)
export type NewUser = Static<typeof NewUser>

/**
 * The bodies of the user's key paths: an object holding the one field the path ends in. Each is a named component,
 * so that SDK generators make one method with one body type; the bare-value encodings each key path also takes
 * are described in the operation (see src/http/key-path.ts).
 */
export const NameValue = Type.Object({ name: Name }, { $id: 'NameValue', additionalProperties: false, description: 'A new name', examples: [{ name: 'Ada King' }] })
export const StatusValue = Type.Object({
  status: ref(UserStatus),
  reason: Type.Optional(Type.String({ maxLength: 500, description: 'With BANNED: why. Shown to admins on the User, never to the user at login' })),
  until: Type.Optional(Type.String({ format: 'date-time', description: 'With BANNED: when the ban ends by itself (a time in the future)' }))
}, { $id: 'StatusValue', additionalProperties: false, description: 'A new status; a ban may carry a reason and an end', examples: [{ status: 'BANNED', reason: 'spam', until: '2026-12-04T00:00:00Z' }] })
export const RoleValue = Type.Object({ role: ref(UserRole) }, { $id: 'RoleValue', additionalProperties: false, description: 'A new role', examples: [{ role: 'admin' }] })
export const PasswordChange = Type.Object(
  {
    password: Password,
    current_password: Type.Optional(Type.String({ maxLength: 256, description: 'Required when users change their own password' }))
  },
  { $id: 'PasswordChange', additionalProperties: false, description: 'A new password; a user changing its own also sends the current one', examples: [{ password: 'a-new-long-password', current_password: 'correct-horse-battery' }] }
)

export const MAX_ID_FILTER = 100

export const UserQuery = Type.Object(
  {
    id: Type.Optional(Type.Array(Id, { maxItems: MAX_ID_FILTER, description: 'Repeatable, at most 100: ?id=1&id=5' })),
    email: Type.Optional(Type.String({ minLength: 1, maxLength: 254, description: 'Any address of the user, exact, case-insensitive' })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 202, description: '`ada`, `ada*`, `*ada` or `*ada*`, case-insensitive' })),
    status: Type.Optional(ref(UserStatus)),
    filter: Type.Optional(Type.String({ maxLength: 2000, description: 'SCIM filter syntax over email, name, status, role, external_id, created_at, updated_at and id: `email ew "@example.com"`' })),
    limit: Limit,
    cursor: Cursor
  },
  { additionalProperties: false }
)
export type UserQuery = Static<typeof UserQuery>

export const EmailParam = Type.Object({
  email: Type.String({ minLength: 1, maxLength: 254, description: 'Any address of the user, case-insensitive (percent-encoded in the path)', examples: ['ada@example.com'] })
}, { additionalProperties: false })
