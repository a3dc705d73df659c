import type { Selectable } from 'kysely'
import type { EmailsTable, SessionsTable } from '../../db/types.js'

// The rows of an address and of a session as the account functions read them and the presenters show them: here,
// beneath both, so that the presenters import nothing from the functions that use them.

export type EmailRow = Pick<Selectable<EmailsTable>, 'id' | 'user_id' | 'address' | 'primary_user_id' | 'version' | 'created_at' | 'verified_at'>

export type SessionRow = Pick<Selectable<SessionsTable>, 'id' | 'user_id' | 'created_at' | 'last_used_at' | 'expires_at' | 'client'>
