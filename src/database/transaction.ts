import { setTimeout as pause } from 'node:timers/promises'
import { MysqlAdapter } from 'kysely'
import type { Db, Trx } from './index.js'
import { isRetryable, isSqliteBusy } from './errors.js'
import { BUSY_WAIT_MS } from './sqlite.js'

/** Attempts of a transaction that keeps losing deadlocks (or, on Galera, certification at commit) before 503. */
const ATTEMPTS = 8

/**
 * Runs fn in a transaction, retrying the whole of it when the engine reports a deadlock: InnoDB's own, or a Galera
 * cluster's certification conflict (two nodes committed writes to the same rows; the later one is told "deadlock"
 * at commit and nothing of it was applied), or when SQLite finds the file's write lock taken by another process
 * (tried again for up to BUSY_WAIT_MS rather than a number of attempts). The delays grow and are jittered, so that
 * writers contending for one row from several nodes spread out; a transaction that still loses is answered 503 (see
 * database/errors.ts). On MySQL the transaction is READ COMMITTED, as every connection of the pool is (see
 * READ_COMMITTED in database/mysql.ts).
 */
export async function inTransaction<T>(db: Db, fn: (trx: Trx) => Promise<T>): Promise<T> {
  let since: number | undefined
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(fn)
    } catch (err) {
      if (!isRetryable(err)) throw err
      // SQLite's busy: another process holds the file's write lock, for as long as it likes; waited for by time.
      if (isSqliteBusy(err) ? Date.now() - (since ??= Date.now()) >= BUSY_WAIT_MS : attempt >= ATTEMPTS) throw err
      const ceiling = Math.min(200, 5 * 2 ** attempt)
      await pause(ceiling / 2 + Math.random() * ceiling / 2)
    }
  }
}

/** MySQL/MariaDB take row locks with FOR UPDATE; SQLite serialises writers by itself and has no such clause. */
export function locksRows(db: Db | Trx): boolean {
  return db.getExecutor().adapter instanceof MysqlAdapter
}

/**
 * A row this transaction has just written, read back inside it: a concurrent delete cannot take it away first, so a
 * missing one is a broken invariant (a 500), never a client's error.
 */
export function written<R>(row: R | undefined, what: string): R {
  if (row === undefined) throw new Error(`${what} vanished inside its own transaction`)
  return row
}
