import type { Selectable } from 'kysely'
import type { EmailsTable, SessionsTable } from '../../db/types.js'

// The rows of an address and of a session as the account functions read them and the presenters show them: here,
// beneath both, so that the presenters import nothing from the functions that use them.

export type EmailRow = Pick<Selectable<EmailsTable>, 'id' | 'user_id' | 'address' | 'primary_user_id' | 'version' | 'created_at' | 'verified_at'>

export type SessionRow = Pick<Selectable<SessionsTable>, 'id' | 'user_id' | 'created_at' | 'last_used_at' | 'expires_at' | 'client'>

/** Whether a user is banned at `now`: a ban whose end has come no longer holds, even before its lift is written. */
export function bannedAt(row: { status: 'ACTIVE' | 'BANNED'; banned_until: number | null }, now: number): boolean {
  return row.status === 'BANNED' && (row.banned_until === null || row.banned_until > now)
}
