import type { Kysely } from 'kysely'
import type { Database } from '../../db/types.js'
import { EMAIL_COLUMNS } from '../accounts/addresses.js'
import { SESSION_COLUMNS } from '../accounts/sessions.js'
import { EVENT_COLUMNS } from '../events/present.js'

type Reader = Kysely<Database>

/** How many users there are, as the snapshot sees them. */
export async function countUsers(db: Reader): Promise<number> {
  const row = await db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow()
  return Number(row.n)
}

/** The next users after `after`, by id, with what an export writes of them, their metadata joined (null: none). */
export function usersAfter(db: Reader, after: number, limit: number) {
  return db.selectFrom('users')
    .leftJoin('user_metadata as m', 'm.user_id', 'users.id')
    .select(['users.id', 'users.external_id', 'users.name', 'users.password_hash', 'users.status', 'users.role', 'users.created_at',
      'm.public as public_metadata', 'm.private as private_metadata', 'm.unsafe as unsafe_metadata'])
    .where('users.id', '>', after).orderBy('users.id').limit(limit).execute()
}

/** The addresses of these users, in each user's order. */
export function addressesOf(db: Reader, userIds: number[]) {
  if (userIds.length === 0) return Promise.resolve([])
  return db.selectFrom('emails').select(['user_id', 'address', 'primary_user_id', 'verified_at'])
    .where('user_id', 'in', userIds).orderBy('user_id').orderBy('id').execute()
}

/** A user's addresses, oldest first. */
export function emailsOf(db: Reader, userId: number) {
  return db.selectFrom('emails').select(EMAIL_COLUMNS).where('user_id', '=', userId).orderBy('id').execute()
}

/** A user's live sessions, oldest first. */
export function sessionsOf(db: Reader, userId: number, now: number) {
  return db.selectFrom('sessions').select(SESSION_COLUMNS).where('user_id', '=', userId).where('expires_at', '>', now).orderBy('id').execute()
}

/** The next of a user's events after the event `after` (an internal id), oldest first. */
export function eventsOf(db: Reader, userId: number, after: number, limit: number) {
  return db.selectFrom('events').select(EVENT_COLUMNS).where('user_id', '=', userId).where('id', '>', after).orderBy('id').limit(limit).execute()
}
