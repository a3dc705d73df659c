import SQLite from 'better-sqlite3'
import { Kysely, SqliteDialect, type ControlledTransaction } from 'kysely'
import type { Database } from '../../db/types.js'
import { DEFAULT_SQLITE_FILE, sqlitePath, type Db, type DialectName } from './index.js'

/** A read of many statements that all see the database as it was at its first one; ended by `close`. */
export interface Snapshot {
  db: ControlledTransaction<Database>
  close: () => Promise<void>
}

/**
 * Opens a snapshot for a long read (an export). MySQL: a REPEATABLE READ transaction on a connection of the pool.
 * SQLite: a read transaction on a connection of its own, so the app's one connection stays free for every other
 * request while the read goes on, and writers go on beside it (WAL). An in-memory database has no second connection:
 * its snapshot is a transaction on the app's own.
 */
export async function openSnapshot(db: Db, dialect: DialectName, url: string | undefined): Promise<Snapshot> {
  const file = dialect === 'sqlite' ? sqlitePath(url ?? `sqlite:${DEFAULT_SQLITE_FILE}`) : ':memory:'
  if (dialect === 'mysql' || file === ':memory:') {
    const begin = db.startTransaction()
    const trx = await (dialect === 'mysql' ? begin.setIsolationLevel('repeatable read') : begin).execute()
    return { db: trx, close: () => trx.rollback().execute() }
  }
  const own = new Kysely<Database>({ dialect: new SqliteDialect({ database: new SQLite(file, { readonly: true, fileMustExist: true }) }) })
  try {
    const trx = await own.startTransaction().execute()
    return { db: trx, close: async () => { try { await trx.rollback().execute() } finally { await own.destroy() } } }
  } catch (err) {
    await own.destroy()
    throw err
  }
}
