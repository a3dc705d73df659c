import type { Email } from '../../schemas/email.js'
import type { Session } from '../../schemas/session.js'
import type { User } from '../../schemas/user.js'
import { isoTimestamp as iso } from '../common/timestamps.js'
import { bannedAt, type EmailRow, type SessionRow } from './rows.js'
import type { UserRow } from './users.js'

// The account resources as every answer and every event shows them. `base` is PUBLIC_URL or '' (root-relative links).

export const userPath = (id: number) => `/users/${id}`
export const emailPath = (userId: number, emailId: number) => `/users/${userId}/emails/${emailId}`
export const sessionPath = (userId: number, sessionId: number) => `/users/${userId}/sessions/${sessionId}`

/**
 * A user as every answer and event shows it. A ban whose end has come shows as lifted at once, before the
 * background lift writes it (users/ban-lift.ts).
 */
export function presentUser(row: UserRow, base: string): User {
  const banned = bannedAt(row, Date.now())
  return {
    id: row.id,
    href: base + userPath(row.id),
    name: row.name,
    email: row.email,
    status: banned ? 'BANNED' : 'ACTIVE',
    role: row.role,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    // A ban older than its details (reason, end, author) shows with none of them.
    ban: banned
      ? {
        reason: row.ban_reason,
        until: row.banned_until === null ? null : iso(row.banned_until),
        at: iso(row.banned_at ?? row.updated_at),
        by: { type: row.banned_by_type ?? 'admin', id: row.banned_by_id }
      }
      : null,
    deletion_scheduled_at: row.deletion_scheduled_at === null ? null : iso(row.deletion_scheduled_at),
    external_id: row.external_id
  }
}

export function presentEmail(row: EmailRow, base: string): Email {
  return {
    id: row.id,
    href: base + emailPath(row.user_id, row.id),
    address: row.address,
    primary: row.primary_user_id !== null,
    verified: row.verified_at !== null,
    verified_at: row.verified_at === null ? null : iso(row.verified_at),
    created_at: iso(row.created_at)
  }
}

/** A session; `current` when it is the caller's own (never, in an event). */
export function presentSession(row: SessionRow, base: string, currentId: number | null): Session {
  return {
    id: row.id,
    href: base + sessionPath(row.user_id, row.id),
    created_at: iso(row.created_at),
    last_used_at: iso(row.last_used_at),
    expires_at: iso(row.expires_at),
    client: row.client,
    current: row.id === currentId
  }
}
