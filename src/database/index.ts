import { mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, Migrator, sql, SqliteDialect, type Transaction } from 'kysely'
import { createPool } from 'mysql2'
import type { Database } from '../../db/types.js'
import { migrationProvider } from '../../db/migrations/index.js'
import { PreparingMysqlDialect } from './mysql-driver.js'
import { cachingStatements } from './sqlite.js'

/** The database handle every repository takes. */
export type Db = Kysely<Database>
/** A handle inside a transaction: functions that must run in one (row locks, multi-statement writes) take this. */
export type Trx = Transaction<Database>

export type DialectName = 'mysql' | 'sqlite'

export interface DatabaseOptions {
  url?: string | undefined
  poolSize?: number
  queueLimit?: number
}

/** Prepared statements each MySQL connection keeps (least recently used closed first). */
const MAX_PREPARED_STATEMENTS = 128

export const DEFAULT_SQLITE_FILE = './data/roster.sqlite'

/** The SQLite file (or ':memory:') named by a `sqlite:` URL. */
export function sqlitePath(url: string): string {
  const rest = url.slice('sqlite:'.length)
  if (rest === ':memory:') return ':memory:'
  return rest.startsWith('//') ? rest.slice(2) : rest
}

/**
 * Opens the database a URL names: MySQL through a bounded mysql2 pool, or an embedded SQLite file (the default).
 */
export function createDatabase(options: DatabaseOptions): { db: Db; dialect: DialectName } {
  const url = options.url ?? `sqlite:${DEFAULT_SQLITE_FILE}`
  if (url.startsWith('mysql://')) {
    const pool = createPool({
      uri: url,
      connectionLimit: options.poolSize ?? 10,
      queueLimit: options.queueLimit ?? 1000,
      waitForConnections: true,
      enableKeepAlive: true,
      connectTimeout: 5000,
      charset: 'utf8mb4_bin',
      // Prepared statements kept per connection. Roster has a few dozen statement texts; the bound keeps a pool
      // far below the server-wide max_prepared_stmt_count even with several instances on one server.
      maxPreparedStatements: MAX_PREPARED_STATEMENTS
    })
    return { db: new Kysely<Database>({ dialect: new PreparingMysqlDialect(pool) }), dialect: 'mysql' }
  }
  const file = sqlitePath(url)
  if (file !== ':memory:') mkdirSync(dirname(resolve(file)), { recursive: true })
  const sqlite = new SQLite(file)
  sqlite.pragma('journal_mode = WAL')
  sqlite.pragma('synchronous = NORMAL')
  sqlite.pragma('foreign_keys = ON')
  sqlite.pragma('busy_timeout = 5000')
  return { db: new Kysely<Database>({ dialect: new SqliteDialect({ database: cachingStatements(sqlite) }) }), dialect: 'sqlite' }
}

/** Applies every pending migration; throws with the failing migration's error. */
export async function migrateToLatest(db: Db): Promise<string[]> {
  const migrator = new Migrator({ db, provider: migrationProvider })
  const { error, results } = await migrator.migrateToLatest()
  if (error) throw error
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)
}

/** One round trip to the database: whether it answers. */
export async function ping(db: Db): Promise<void> {
  await sql`select 1`.execute(db)
}
