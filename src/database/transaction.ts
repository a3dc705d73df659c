import { MysqlAdapter } from 'kysely'
import type { Db, Trx } from './index.js'
import { isRetryable } from './errors.js'

/**
 * Runs fn in a transaction, retrying the whole of it a few times when the engine reports a deadlock.
 *
 * On MySQL/MariaDB the transaction is READ COMMITTED: InnoDB then takes no gap locks for the rows a statement scans,
 * only locks on the rows it changes or reads FOR UPDATE. Roster's rules never rely on gap locks (a user's writes
 * serialise on its row, read FOR UPDATE; uniqueness is the unique indexes'), while REPEATABLE READ's gap locks made
 * unrelated transactions deadlock: two logins of different users, each deleting its expired tokens and inserting
 * new ones into the neighbouring gap. (It needs row-based or mixed binary logging where binary logging is on: the
 * default of MariaDB and MySQL 8, and Galera's requirement.) SQLite has a single writer and ignores the setting.
 */
export async function inTransaction<T>(db: Db, fn: (trx: Trx) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().setIsolationLevel('read committed').execute(fn)
    } catch (err) {
      if (attempt >= 4 || !isRetryable(err)) throw err
      await new Promise((r) => setTimeout(r, 5 * attempt + Math.random() * 10))
    }
  }
}

/** MySQL/MariaDB take row locks with FOR UPDATE; SQLite serialises writers by itself and has no such clause. */
export function locksRows(db: Db | Trx): boolean {
  return db.getExecutor().adapter instanceof MysqlAdapter
}
