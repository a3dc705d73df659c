import type { Generated } from 'kysely'
import type { UserRole, UserStatus } from '../schemas/user.js'

/** Times are stored as integer milliseconds since the epoch on both engines: no time zone or precision drift. */
export interface UsersTable {
  id: Generated<number>
  name: string
  /** Lower-cased name, indexed for case-insensitive exact and prefix search. */
  name_search: string
  password_hash: string
  status: UserStatus
  role: UserRole
  /** Bumped by every change to the user's representation; the ETag and If-Match are built on it. */
  version: number
  created_at: number
  updated_at: number
}

export interface EmailsTable {
  id: Generated<number>
  user_id: number
  address: string
  /** Lower-cased address; its unique index makes addresses unique case-insensitively on every engine. */
  address_norm: string
  /** The owner's id while this is the primary address, else null; unique, so a user has at most one primary. */
  primary_user_id: number | null
  version: number
  created_at: number
  updated_at: number
}

export interface TokensTable {
  id: Generated<number>
  /** SHA-256 of the token, hex. The token itself is never stored. */
  token_hash: string
  user_id: number
  created_at: number
  expires_at: number
}

export interface AppSecretsTable {
  name: string
  value: string
}

export interface Database {
  users: UsersTable
  emails: EmailsTable
  tokens: TokensTable
  app_secrets: AppSecretsTable
}
