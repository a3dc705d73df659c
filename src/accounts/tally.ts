import { sql } from 'kysely'
import type { Db, Trx } from '../database/index.js'

/** The slots migration 0018 made: a write moves the one its user's id picks, so concurrent ones rarely share a row. */
const SLOTS = 16

/**
 * Counts `delta` users in the tally, in the transaction that made them (1), restored them (1), deleted them or
 * scheduled their deletion (-1): it counts the users whose deletion is not scheduled, those SCIM shows.
 */
export async function tallyUsers(trx: Trx, userId: number, delta: number): Promise<void> {
  await trx.updateTable('user_tally').set({ users: sql`users + ${delta}` }).where('slot', '=', userId % SLOTS).execute()
}

/** How many users there are, less those whose deletion is scheduled, as the committed writes tallied them. */
export async function talliedUsers(db: Db | Trx): Promise<number> {
  const row = await db.selectFrom('user_tally').select((eb) => eb.fn.sum<number | string>('users').as('n')).executeTakeFirst()
  return Number(row?.n ?? 0)
}
