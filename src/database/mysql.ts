import {
  Kysely, MysqlAdapter, MysqlDialect, sql, type DialectAdapter, type MysqlPool, type MysqlPoolConnection, type MysqlQueryResult
} from 'kysely'
import { createPool, type Pool, type PoolConnection, type Query } from 'mysql2'
import type { Database } from '../../db/types.js'
import type { PoolUse } from '../metrics/kinds.js'
import { statement } from '../tracing/spans.js'
import type { DatabaseOptions, Db } from './index.js'

/**
 * MySQL/MariaDB sessions run READ COMMITTED: InnoDB then takes no gap locks for the rows a statement scans, only locks
 * on the rows it changes or reads FOR UPDATE. Roster's rules never rely on gap locks (a user's writes serialise on its
 * row; uniqueness is the unique indexes'), while REPEATABLE READ's gap locks made unrelated transactions deadlock: two
 * logins of different users, each deleting its expired tokens and inserting new ones into the neighbouring gap. It
 * needs row-based or mixed binary logging where binary logging is on (the default of MariaDB and MySQL 8, and
 * Galera's requirement).
 */
const READ_COMMITTED = 'set session transaction isolation level read committed'

/**
 * The deadline of one migration statement. A migration is not request traffic: DDL on a big table takes as long as it
 * takes, and another instance's migration holds the lock. Only a server that answers nothing for this long fails it.
 */
const MIGRATION_STATEMENT_MS = 60 * 60 * 1000

/** A statement or a connection that did not come in time: the database is hung or saturated (503, not 500). */
export class DatabaseTimeout extends Error {
  readonly code = 'DB_TIMEOUT'
  constructor(what: string, ms: number) {
    super(`${what} took longer than ${ms} ms`)
  }
}

/** Connections handed out and not yet given back, and the checkouts that had to wait: what the metrics read. */
interface Use {
  held: number
  waits: number
}

/**
 * mysql2's pool as Kysely's MySQL dialect takes it, with the deadline neither has: a checkout, and each statement,
 * fails with DatabaseTimeout past `ms` (the first statement of a checkout counts from the wait for its connection).
 */
class DeadlinePool implements MysqlPool {
  constructor(private readonly pool: Pool, private readonly ms: number, private readonly use: Use) {}

  getConnection(handed: (error: unknown, connection: MysqlPoolConnection) => void): void {
    // Kysely's type asks for a connection even with an error; its driver reads none then, as mysql2 passes none.
    const callback = handed as (error: unknown, connection?: MysqlPoolConnection) => void
    const asked = Date.now()
    let late = false
    const timer = setTimeout(() => {
      late = true
      callback(new DatabaseTimeout('Waiting for a database connection', this.ms))
    }, this.ms)
    this.pool.getConnection((err, connection) => {
      if (late) {
        if (!err) connection.release()
        return
      }
      clearTimeout(timer)
      if (err) return callback(err)
      this.use.held++
      callback(null, new DeadlineConnection(connection, this.ms, Date.now() - asked, this.use))
    })
  }

  end(callback: (error: unknown) => void): void {
    this.pool.end(callback)
  }
}

/**
 * One checkout of a pooled connection. A statement past its deadline destroys the connection: a late answer would be
 * taken for the next statement's, and the server rolls back a transaction left open on it. What Kysely sends on it
 * after that (its rollback) fails at once.
 */
class DeadlineConnection {
  /** The first statement's deadline: what the wait for the connection left of one. */
  private first: number | undefined
  private broken = false

  constructor(private readonly connection: PoolConnection, private readonly ms: number, waited: number, private readonly use: Use) {
    this.first = ms - waited
  }

  /** Without a callback: a streamed read, bound by no deadline (it lasts as long as its reader takes). */
  query(sql: string, parameters: unknown[]): Query
  query(sql: string, parameters: unknown[], callback: (error: unknown, result?: MysqlQueryResult) => void): void
  query(sql: string, parameters: unknown[], callback?: (error: unknown, result?: MysqlQueryResult) => void): Query | undefined {
    if (!callback) return this.connection.query(sql, parameters)
    const ms = this.first ?? this.ms
    this.first = undefined
    if (this.broken) {
      callback(new DatabaseTimeout('A statement on this connection', this.ms))
      return undefined
    }
    statement(sql, () => new Promise<MysqlQueryResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.broken = true
        this.connection.destroy()
        reject(new DatabaseTimeout('A statement', this.ms))
      }, ms)
      this.connection.query(sql, parameters, (err, result) => {
        clearTimeout(timer)
        // The driver's result: rows, typed by the query Kysely compiled, or the packet of a write.
        if (err) reject(err)
        else resolve(result as MysqlQueryResult)
      })
    })).then((result) => callback(null, result), callback)
    return undefined
  }

  release(): void {
    this.use.held--
    if (!this.broken) this.connection.release()
  }
}

/**
 * The name of the lock a migration of this database holds. Kysely's MySQL adapter takes one lock of a fixed name,
 * which is server-wide: starts of unrelated databases on one server would queue behind each other's migrations.
 * This one is named after the database (a digest, within the 64 characters a lock name may have).
 */
export const MIGRATION_LOCK = "concat('roster-migrate:', md5(database()))"

/** How long a start waits for another instance's migration of the same database (as Kysely's adapter does). */
const MIGRATION_LOCK_WAIT_SECONDS = 60 * 60

class MigrationLockPerDatabase extends MysqlAdapter {
  override async acquireMigrationLock(db: Kysely<unknown>): Promise<void> {
    await sql`select get_lock(${sql.raw(MIGRATION_LOCK)}, ${sql.lit(MIGRATION_LOCK_WAIT_SECONDS)})`.execute(db)
  }

  override async releaseMigrationLock(db: Kysely<unknown>): Promise<void> {
    await sql`select release_lock(${sql.raw(MIGRATION_LOCK)})`.execute(db)
  }
}

class MigratingMysqlDialect extends MysqlDialect {
  override createAdapter(): DialectAdapter {
    return new MigrationLockPerDatabase()
  }
}

export interface OpenMysql {
  db: Db
  /** Runs `work` (the migrations) on a handle of its own, with one connection and no request deadline, closed after. */
  migrating: <T>(work: (db: Db) => Promise<T>) => Promise<T>
  poolUse: () => PoolUse
}

/** Kysely's MySQL dialect over a bounded mysql2 pool, every connection READ COMMITTED, every statement on a deadline. */
export function openMysql(url: string, options: DatabaseOptions): OpenMysql {
  const size = options.poolSize ?? 10
  const timeoutMs = options.timeoutMs ?? 2000
  const pool = (connectionLimit: number) => {
    const made = createPool({
      uri: url, connectionLimit, queueLimit: options.queueLimit ?? 1000, waitForConnections: true, enableKeepAlive: true,
      connectTimeout: Math.max(1000, timeoutMs), charset: 'utf8mb4_bin'
    })
    // Sent ahead of anything else on a new connection. One whose setup failed is destroyed, with what waited on it.
    made.on('connection', (connection) => {
      connection.query(READ_COMMITTED, (err) => { if (err) connection.destroy() })
    })
    return made
  }
  const use: Use = { held: 0, waits: 0 }
  const requests = pool(size)
  requests.on('enqueue', () => { use.waits++ })
  const db = new Kysely<Database>({ dialect: new MysqlDialect({ pool: new DeadlinePool(requests, timeoutMs, use) }) })
  return {
    db,
    async migrating(work) {
      const pool1 = new DeadlinePool(pool(1), MIGRATION_STATEMENT_MS, { held: 0, waits: 0 })
      const migrator = new Kysely<Database>({ dialect: new MigratingMysqlDialect({ pool: pool1 }) })
      try {
        return await work(migrator)
      } finally {
        await migrator.destroy()
      }
    },
    poolUse: () => ({ size, inUse: use.held, waits: use.waits })
  }
}
