import type { User } from '../../schemas/user.js'
import { isoTimestamp as iso } from '../common/timestamps.js'
import type { UserRow } from '../accounts/users.js'

export const userPath = (id: number) => `/users/${id}`

/** A user as every answer shows it; `base` is PUBLIC_URL or '' (root-relative links). */
export function presentUser(row: UserRow, base: string): User {
  return {
    id: row.id,
    href: base + userPath(row.id),
    name: row.name,
    email: row.email,
    status: row.status,
    role: row.role,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at)
  }
}
