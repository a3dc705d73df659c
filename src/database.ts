import { mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, Migrator, SqliteDialect, type SqliteDatabase } from 'kysely'
import { createPool } from 'mysql2'
import type { Database } from '../db/types.js'
import { migrationProvider } from '../db/migrations/index.js'
import { PreparingMysqlDialect } from './lib/mysql-dialect.js'

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
export function createDatabase(options: DatabaseOptions): { db: Kysely<Database>; dialect: DialectName } {
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

/** How many prepared statements the embedded engine keeps: far more than the distinct SQL texts Roster runs. */
const STATEMENT_CACHE_SIZE = 512

/**
 * Kysely's SQLite driver prepares the statement of every query it runs, which costs more than running it. The SQL
 * texts repeat (values are bound, not inlined), so prepared statements are kept by text, the least recently used
 * dropped past STATEMENT_CACHE_SIZE. Safe because the driver runs one query at a time on its one connection, and
 * SQLite re-prepares a kept statement by itself after a schema change.
 */
export function cachingStatements(sqlite: SQLite.Database, size = STATEMENT_CACHE_SIZE): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>()
  return {
    prepare(sql) {
      let statement = statements.get(sql)
      if (statement) {
        statements.delete(sql) // re-inserted below: the map stays in order of last use
      } else {
        statement = sqlite.prepare(sql)
        if (statements.size >= size) statements.delete(statements.keys().next().value!)
      }
      statements.set(sql, statement)
      return statement
    },
    close() {
      statements.clear()
      sqlite.close()
    }
  }
}

/** Applies every pending migration; throws with the failing migration's error. */
export async function migrateToLatest(db: Kysely<Database>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: migrationProvider })
  const { error, results } = await migrator.migrateToLatest()
  if (error) throw error
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)
}

interface DriverError { code?: unknown; errno?: unknown }

/** A unique index refused the write (MySQL/MariaDB ER_DUP_ENTRY, SQLite constraint). */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as DriverError
  return e?.code === 'ER_DUP_ENTRY' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

/** A transaction lost a deadlock or lock wait and may be retried as a whole. */
export function isRetryable(err: unknown): boolean {
  const e = err as DriverError
  return e?.code === 'ER_LOCK_DEADLOCK' || e?.code === 'ER_LOCK_WAIT_TIMEOUT' || e?.code === 'SQLITE_BUSY'
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH',
  'PROTOCOL_CONNECTION_LOST', 'PROTOCOL_SEQUENCE_TIMEOUT', 'ER_CON_COUNT_ERROR', 'POOL_CLOSED',
  'ER_SERVER_SHUTDOWN', 'SQLITE_BUSY', 'SQLITE_IOERR'
])

/** The database could not be reached or is saturated: the request may succeed later (503, not 500). */
export function isUnavailable(err: unknown): boolean {
  const e = err as DriverError & { message?: unknown }
  if (typeof e?.code === 'string' && UNAVAILABLE_CODES.has(e.code)) return true
  return typeof e?.message === 'string' && /Queue limit reached|Pool is closed|connect ETIMEDOUT/.test(e.message)
}

/** Runs fn in a transaction, retrying the whole of it a few times when the engine reports a deadlock. */
export async function inTransaction<T>(db: Kysely<Database>, fn: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(fn)
    } catch (err) {
      if (attempt >= 4 || !isRetryable(err)) throw err
      await new Promise((r) => setTimeout(r, 5 * attempt + Math.random() * 10))
    }
  }
}
