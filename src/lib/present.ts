import type { Email } from '../../schemas/email.js'
import type { User } from '../../schemas/user.js'
import type { EmailRow } from '../repositories/emails.js'
import type { UserRow } from '../repositories/users.js'
import { isoTimestamp as iso } from './timestamps.js'


export const userPath = (id: number) => `/users/${id}`
export const emailPath = (userId: number, emailId: number) => `/users/${userId}/emails/${emailId}`

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

export function presentEmail(row: EmailRow, base: string): Email {
  return {
    id: row.id,
    href: base + emailPath(row.user_id, row.id),
    address: row.address,
    primary: row.primary_user_id !== null,
    created_at: iso(row.created_at)
  }
}

/** A collection's link: its path and the query that selects it, in a stable order. */
export function collectionHref(base: string, path: string, params: Array<[string, string]>): string {
  const query = new URLSearchParams(params).toString()
  return base + path + (query ? `?${query}` : '')
}
