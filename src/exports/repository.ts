import type { Kysely } from 'kysely'
import type { Database } from '../../db/types.js'

type Reader = Kysely<Database>

/** How many users there are, as the snapshot sees them. */
export async function countUsers(db: Reader): Promise<number> {
  const row = await db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow()
  return Number(row.n)
}

/** The next users after `after`, by id, with what an export writes of them. */
export function usersAfter(db: Reader, after: number, limit: number) {
  return db.selectFrom('users')
    .select(['id', 'external_id', 'name', 'password_hash', 'status', 'role', 'created_at'])
    .where('id', '>', after).orderBy('id').limit(limit).execute()
}

/** The addresses of these users, in each user's order. */
export function addressesOf(db: Reader, userIds: number[]) {
  if (userIds.length === 0) return Promise.resolve([])
  return db.selectFrom('emails').select(['user_id', 'address', 'primary_user_id', 'verified_at'])
    .where('user_id', 'in', userIds).orderBy('user_id').orderBy('id').execute()
}
