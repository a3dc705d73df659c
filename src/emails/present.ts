import type { Email } from '../../schemas/email.js'
import { isoTimestamp as iso } from '../common/timestamps.js'
import type { EmailRow } from '../accounts/addresses.js'

export const emailPath = (userId: number, emailId: number) => `/users/${userId}/emails/${emailId}`

/** An address as every answer shows it; `base` is PUBLIC_URL or '' (root-relative links). */
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
