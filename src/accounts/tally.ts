import { sql } from 'kysely'
import type { Db, Trx } from '../database/index.js'

/** The slots migration 0018 made: a write moves the one its user's id picks, so concurrent ones rarely share a row. */
const SLOTS = 16

/** Counts `delta` users (negative: deleted) in the tally, in the transaction that made or deleted them. */
export async function tallyUsers(trx: Trx, userId: number, delta: number): Promise<void> {
  await trx.updateTable('user_tally').set({ users: sql`users + ${delta}` }).where('slot', '=', userId % SLOTS).execute()
}

/**
 * How many users SCIM shows, in one statement: the tally, less the users whose deletion is scheduled (a few, read on
 * their index). The tally counts every row, so that only the writes that make and delete rows move it.
 */
export async function talliedUsers(db: Db | Trx): Promise<number> {
  const tallied = db.selectFrom('user_tally').select((eb) => eb.fn.sum<number | string>('users').as('n'))
  const leaving = db.selectFrom('users').select((eb) => eb.fn.countAll<number | string>().as('n')).where('deletion_scheduled_at', 'is not', null)
  const row = await db.selectNoFrom([tallied.as('tallied'), leaving.as('leaving')]).executeTakeFirst()
  return Number(row?.tallied ?? 0) - Number(row?.leaving ?? 0)
}
