import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import SQLite from 'better-sqlite3'
import { Kysely, Migrator, sql, type Transaction } from 'kysely'
import { createPool, type Pool } from 'mysql2'
import type { Database } from '../../db/types.js'
import { migrationProvider } from '../../db/migrations/index.js'
import { StartupError } from '../common/errors.js'
import type { PoolUse } from '../metrics/kinds.js'
import { connectionsHeld, PreparingMysqlDialect, TRANSACTION_POOL_SETUP, type Pools } from './mysql-driver.js'
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
  /** MySQL: the pool's use: connections the driver's sessions hold, and waits counted from the pool's events. */
  poolUse?: () => PoolUse
}

export interface DatabaseOptions {
  url?: string | undefined
  poolSize?: number
  queueLimit?: number
  /** MySQL: the deadline of one round trip, the wait for a connection included (DB_TIMEOUT_MS). */
  timeoutMs?: number
}

/**
 * MySQL/MariaDB transactions run READ COMMITTED: InnoDB then takes no gap locks for the rows a statement scans, only
 * locks on the rows it changes or reads FOR UPDATE. Roster's rules never rely on gap locks (a user's writes serialise
 * on its row; uniqueness is the unique indexes'), while REPEATABLE READ's gap locks made unrelated transactions
 * deadlock: two logins of different users, each deleting its expired tokens and inserting new ones into the
 * neighbouring gap. It needs row-based or mixed binary logging where binary logging is on (the default of MariaDB
 * and MySQL 8, and Galera's requirement). SQLite has a single writer and no such setting.
 */
const READ_COMMITTED = 'set session transaction isolation level read committed'

/**
 * Sends `statements` on each new connection of `pool`, ahead of anything a session sends on it. A connection whose
 * setup failed is destroyed: whatever was queued behind fails with it, rather than a transaction running there with
 * autocommit still on, each statement committed by itself.
 */
function setUpEach(pool: Pool, ...statements: string[]): void {
  pool.on('connection', (connection) => {
    for (const text of statements) connection.query(text, (err) => { if (err) connection.destroy() })
  })
}

/**
 * The deadline of one migration statement on MySQL. A migration is not request traffic: DDL on a big table takes as
 * long as it takes, and another instance's migration holds the lock (Kysely waits up to an hour for it). Only a
 * server that answers nothing for this long fails the start.
 */
const MIGRATION_STATEMENT_MS = 60 * 60 * 1000

/** Prepared statements each MySQL connection keeps (least recently used closed first). */
const MAX_PREPARED_STATEMENTS = 128

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
    // DB_POOL_SIZE connections for statements outside transactions, and as many for transactions.
    const size = options.poolSize ?? 10
    const poolOptions = {
      uri: url,
      queueLimit: options.queueLimit ?? 1000,
      waitForConnections: true,
      enableKeepAlive: true,
      // A connection keeps its session as set up (setUpEach): a reset on release would turn autocommit back on.
      resetOnRelease: false,
      connectTimeout: Math.max(1000, options.timeoutMs ?? 2000),
      charset: 'utf8mb4_bin',
      // Prepared statements kept per connection. Roster has a few dozen statement texts; the bound keeps a pool
      // far below the server-wide max_prepared_stmt_count even with several instances on one server.
      maxPreparedStatements: MAX_PREPARED_STATEMENTS
    }
    const pools: Pools = {
      statements: createPool({ ...poolOptions, connectionLimit: size }),
      transactions: createPool({ ...poolOptions, connectionLimit: size })
    }
    // Set once per connection, so that a transaction costs no statement to begin (Pools, in mysql-driver.ts).
    setUpEach(pools.statements, READ_COMMITTED)
    setUpEach(pools.transactions, READ_COMMITTED, TRANSACTION_POOL_SETUP)
    // A request that finds every connection taken waits in mysql2's queue: counted as it starts waiting.
    let waits = 0
    pools.statements.on('enqueue', () => { waits++ })
    pools.transactions.on('enqueue', () => { waits++ })
    const timeoutMs = options.timeoutMs ?? 2000
    // Over the same pools, never destroyed itself: the pools end with `db`.
    const migrating = new Kysely<Database>({ dialect: new PreparingMysqlDialect(pools, MIGRATION_STATEMENT_MS) })
    const db = new Kysely<Database>({ dialect: new PreparingMysqlDialect(pools, timeoutMs) })
    const inUse = () => connectionsHeld(pools.statements) + connectionsHeld(pools.transactions)
    const migrate = async () => {
      // Kysely destroys only a driver it has used: a `db` unused but for a migration (npm run db:migrate) would keep
      // the pools, and the process, open. Taking a session sends nothing.
      await db.connection().execute(async () => {})
      return migrateToLatest(migrating)
    }
    return { db, dialect: 'mysql', migrate, poolUse: () => ({ size: 2 * size, inUse: inUse(), waits }) }
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
