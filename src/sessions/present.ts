import type { Session } from '../../schemas/session.js'
import { isoTimestamp as iso } from '../common/timestamps.js'
import type { SessionRow } from './repository.js'

export const sessionPath = (userId: number, sessionId: number) => `/users/${userId}/sessions/${sessionId}`

/** A session as every answer shows it; `current` when it is the caller's own. */
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
