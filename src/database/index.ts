import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, Migrator, sql, type Transaction } from 'kysely'
import type { Database } from '../../db/types.js'
import { migrationProvider } from '../../db/migrations/index.js'
import { StartupError } from '../common/errors.js'
import type { PoolUse } from '../metrics/kinds.js'
import { openMysql } from './mysql.js'
import { BUSY_TIMEOUT_MS, cachingStatements, PatientSqliteDialect } from './sqlite.js'

/** The database handle every repository takes. */
export type Db = Kysely<Database>
/** A handle inside a transaction: functions that must run in one (row locks, multi-statement writes) take this. */
export type Trx = Transaction<Database>

export type DialectName = 'mysql' | 'sqlite'

export interface OpenDatabase {
  db: Db
  dialect: DialectName
  /** Applies every pending migration (see migrateToLatest), its statements not bound by the request deadline. */
  migrate: () => Promise<string[]>
  /** MySQL: the pool's use: connections held now, and how many checkouts have had to wait. */
  poolUse?: () => PoolUse
}

export interface DatabaseOptions {
  url?: string | undefined
  poolSize?: number
  queueLimit?: number
  /** MySQL: the deadline of one round trip, the wait for a connection included (DB_TIMEOUT_MS). */
  timeoutMs?: number
}

export const DEFAULT_SQLITE_FILE = './data/roster.sqlite'

/** The embedded database's file cannot be made where DATABASE_URL says: the start fails with this one line. */
export class DatabaseFileError extends StartupError {
  constructor(file: string, cause: NodeJS.ErrnoException) {
    super(`DATABASE_URL: cannot create the SQLite file ${file} (${cause.code ?? cause.message}${cause.path && cause.path !== file ? ` at ${cause.path}` : ''}): ` +
      'name a path in a directory the service may write to', { cause })
  }
}

/**
 * Makes a directory and its missing parents, one level at a time: `mkdirSync(…, { recursive: true })` never returns
 * for a path under /proc on Linux, where the start would hang without a word.
 */
function makeDirectories(dir: string): void {
  if (existsSync(dir)) return
  makeDirectories(dirname(dir))
  mkdirSync(dir)
}

/** The SQLite file (or ':memory:') named by a `sqlite:` URL. */
export function sqlitePath(url: string): string {
  const rest = url.slice('sqlite:'.length)
  if (rest === ':memory:') return ':memory:'
  return rest.startsWith('//') ? rest.slice(2) : rest
}

/**
 * Opens the database a URL names: MySQL through a bounded mysql2 pool, or an embedded SQLite file (the default).
 */
export function createDatabase(options: DatabaseOptions): OpenDatabase {
  const url = options.url ?? `sqlite:${DEFAULT_SQLITE_FILE}`
  if (url.startsWith('mysql://')) {
    const { db, migrating, poolUse } = openMysql(url, options)
    return { db, dialect: 'mysql', migrate: () => migrating(migrateToLatest), poolUse }
  }
  const file = sqlitePath(url)
  if (file !== ':memory:') {
    try {
      makeDirectories(dirname(resolve(file)))
      // Readable by the service's own user only: it holds password hashes. SQLite gives its -wal and -shm files the
      // database file's mode.
      closeSync(openSync(file, 'a', 0o600))
    } catch (err) {
      throw new DatabaseFileError(file, err as NodeJS.ErrnoException)
    }
  }
  const sqlite = new SQLite(file)
  sqlite.pragma('journal_mode = WAL')
  sqlite.pragma('synchronous = NORMAL')
  sqlite.pragma('foreign_keys = ON')
  sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
  const db = new Kysely<Database>({ dialect: new PatientSqliteDialect(sqlite, cachingStatements(sqlite)) })
  return { db, dialect: 'sqlite', migrate: () => migrateToLatest(db) }
}

/** Applies every pending migration; throws with the failing migration's error. */
export async function migrateToLatest(db: Db): Promise<string[]> {
  const migrator = new Migrator({ db, provider: migrationProvider })
  const { error, results } = await migrator.migrateToLatest()
  if (error) throw error instanceof Error ? error : new Error('a migration failed', { cause: error })
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)
}

/** One round trip to the database: whether it answers. */
export async function ping(db: Db): Promise<void> {
  await sql`select 1`.execute(db)
}
