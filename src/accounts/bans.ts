import type { Db, Trx } from '../database/index.js'
import { changedFields, recordEvent, systemCause } from '../events/record.js'
import { presentUser } from './present.js'
import { lockUserRow, NO_BAN, updateUserRow } from './users.js'

/**
 * Lifts a user's ban if its end has come (`user.status_changed`, actor `system`): by the background lift, or by the
 * user's own sign-in at that moment, whichever comes first. The row is read under its lock and written only if it is
 * still banned to an end that has passed, so that two instances, or a lift and a sign-in, write the event once.
 * Whether it lifted one.
 */
export async function liftEndedBan(trx: Trx, userId: number, now: number, base: string): Promise<boolean> {
  const before = await lockUserRow(trx, userId)
  if (before.status !== 'BANNED' || before.banned_until === null || before.banned_until > now) return false
  await updateUserRow(trx, userId, { status: 'ACTIVE', ...NO_BAN, updated_at: now })
  const cause = systemCause(base)
  // As it was, it already shows as lifted (presentUser); the event's previous values are the ban's.
  const was = { ...presentUser(before, base), status: 'BANNED' as const }
  const after = presentUser({ ...before, status: 'ACTIVE', ...NO_BAN, version: before.version + 1, updated_at: now }, base)
  await recordEvent(trx, cause, 'user.status_changed', userId, after, {
    ...changedFields(was, after),
    ban: {
      reason: before.ban_reason, until: new Date(before.banned_until).toISOString(),
      at: new Date(before.banned_at ?? before.updated_at).toISOString(), by: { type: before.banned_by_type ?? 'admin', id: before.banned_by_id }
    }
  })
  return true
}

/** The users whose ban has reached its end and is not lifted yet, a batch of them. */
export async function endedBans(db: Db, now: number, limit: number): Promise<number[]> {
  const rows = await db.selectFrom('users').select('id').where('status', '=', 'BANNED').where('banned_until', '<=', now).limit(limit).execute()
  return rows.map((r) => r.id)
}
