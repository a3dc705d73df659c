import { MysqlAdapter } from 'kysely'
import type { Db, Trx } from './index.js'
import { isRetryable } from './errors.js'

/**
 * Runs fn in a transaction, retrying the whole of it a few times when the engine reports a deadlock. On MySQL the
 * transaction is READ COMMITTED, as every connection of the pool is (see READ_COMMITTED in database/index.ts).
 */
export async function inTransaction<T>(db: Db, fn: (trx: Trx) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(fn)
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
