import {
  CompiledQuery, MysqlAdapter, sql, MysqlIntrospector, MysqlQueryCompiler,
  type DatabaseConnection, type DatabaseIntrospector, type Dialect, type DialectAdapter, type Driver, type Kysely,
  type QueryCompiler, type QueryResult, type TransactionSettings
} from 'kysely'
import type { ExecuteValues, Pool, PoolConnection, QueryError } from 'mysql2'
import { statement } from '../tracing/spans.js'

/** Statements sent as server-side prepared statements; everything else (DDL, transaction control) goes as text. */
const PREPARED = /^\s*(select|insert|update|delete|with)\b/i

/**
 * A statement with more values than this goes as text even so: its shape follows a list's length (the events a
 * sequencing run places, the ids of a batch), so each length would be prepared once on every connection and kept
 * there, with the description of each of its parameters: about 3.4 MB a connection for lists of 1 to 100 values
 * (BENCHMARKS.md, Memory). The statements of the hot paths have far fewer.
 */
export const MAX_PREPARED_PARAMETERS = 32

/** MariaDB and MySQL refuse more prepared statements than max_prepared_stmt_count (16 382 by default), server-wide. */
const TOO_MANY_STATEMENTS = 'ER_MAX_PREPARED_STMT_COUNT_REACHED'

type Row = Record<string, unknown>
type Packet = { insertId?: number; affectedRows?: number; changedRows?: number }

/**
 * The two pools of one database. Statements outside a transaction run on `statements`, whose connections commit each
 * statement by itself. Transactions run on `transactions`, whose connections have autocommit off (TRANSACTION_POOL_SETUP):
 * there a transaction begins with its first statement, and the round trip of a `begin` is saved, since after its
 * commit or rollback a connection holds no transaction until its next statement.
 */
export interface Pools {
  statements: Pool
  transactions: Pool
}

/** Set once on each connection of the transactions' pool (see Pools). */
export const TRANSACTION_POOL_SETUP = 'set session autocommit = 0'

/** Connections of each pool held by a session now: taken at a session's first statement, given back at its release. */
const held = new WeakMap<Pool, { count: number }>()

/** How many of the pool's connections sessions hold now (the metrics read it). */
export function connectionsHeld(pool: Pool): number {
  return held.get(pool)?.count ?? 0
}

function holding(pool: Pool): { count: number } {
  let entry = held.get(pool)
  if (!entry) held.set(pool, entry = { count: 0 })
  return entry
}

/** A statement or a connection that did not come in time: the database is hung or saturated (503, not 500). */
export class DatabaseTimeout extends Error {
  readonly code = 'DB_TIMEOUT'
  constructor(what: string, ms: number) {
    super(`${what} took longer than ${ms} ms`)
  }
}

/**
 * Sends one statement on a connection: data statements as prepared statements (the server parses and plans the text
 * once per connection, and values travel in binary), the rest as text. A server out of statement slots gets the
 * text form. Callbacks throughout: no promise per step.
 */
function send(on: PoolConnection, sql: string, parameters: readonly unknown[], done: (err: QueryError | null, result?: QueryResult<Row>) => void): void {
  const prepared = parameters.length <= MAX_PREPARED_PARAMETERS && PREPARED.test(sql)
  const answered = (err: QueryError | null, result: unknown) => {
    if (!err) return done(null, toQueryResult(result))
    if (prepared && err.code === TOO_MANY_STATEMENTS) return on.query(sql, parameters as unknown[], answered)
    done(err)
  }
  if (prepared) on.execute(sql, parameters as ExecuteValues[], answered)
  else on.query(sql, parameters as unknown[], answered)
}

/**
 * One round trip within a deadline: on `session`'s connection, or on one taken from the pool first (then bound to the
 * session). Past the deadline the caller gets a DatabaseTimeout at once; a connection that has not answered by then is
 * destroyed, since a late answer would be taken for the next statement's, and a transaction on it ends with it (the
 * server rolls it back). One timer covers the checkout and the statement.
 */
function within(session: Session, sql: string, parameters: readonly unknown[]): Promise<QueryResult<Row>> {
  const ms = session.timeoutMs
  return new Promise((resolve, reject) => {
    let settled = false
    const timer = setTimeout(() => {
      settled = true
      if (session.connection) session.break()
      reject(new DatabaseTimeout(session.connection ? 'A statement' : 'Waiting for a database connection', ms))
    }, ms)
    const done = (err: QueryError | null, result?: QueryResult<Row>) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (err) reject(err)
      else resolve(result!)
    }
    if (session.connection) return send(session.connection, sql, parameters, done)
    session.pool().getConnection((err, connection) => {
      if (err) return done(err as QueryError)
      if (settled) return connection.release() // too late: back to the pool, unused
      session.bound(connection)
      send(connection, sql, parameters, done)
    })
  })
}

function toQueryResult(result: unknown): QueryResult<Row> {
  if (Array.isArray(result)) return { rows: result as Row[] }
  const packet = result as Packet | null
  if (packet && typeof packet === 'object' && 'affectedRows' in packet) {
    return {
      rows: [],
      insertId: packet.insertId ? BigInt(packet.insertId) : undefined,
      numAffectedRows: packet.affectedRows === undefined ? undefined : BigInt(packet.affectedRows),
      numChangedRows: packet.changedRows === undefined ? undefined : BigInt(packet.changedRows)
    }
  }
  return { rows: [] }
}

const BEGIN = CompiledQuery.raw('begin')
const COMMIT = CompiledQuery.raw('commit')
const ROLLBACK = CompiledQuery.raw('rollback')

/**
 * What Kysely calls a connection: one pooled connection, bound at its first statement (not at acquire, so that an
 * acquired session costs nothing until it is used) and held until Kysely releases the session. A single statement
 * therefore costs one checkout, one round trip and one release, all through mysql2's callbacks with one promise;
 * `db.connection()` and a transaction get the same connection for every statement, as Kysely's contract says.
 */
class Session implements DatabaseConnection {
  connection: PoolConnection | undefined
  /** The connection was destroyed (it missed a deadline): nothing more is sent on it, not even a rollback. */
  broken = false
  /**
   * Kysely began a transaction on this session: its connection comes from the transactions' pool, and the
   * transaction is open from its first statement until a commit or a rollback has been answered.
   */
  transaction: 'none' | 'begun' | 'open' = 'none'
  /** The pool the bound connection came from. */
  from: Pool | undefined
  constructor(readonly pools: Pools, readonly timeoutMs: number) {}

  /** The pool a connection is taken from at the first statement. */
  pool(): Pool {
    return this.transaction === 'none' ? this.pools.statements : this.pools.transactions
  }

  bound(connection: PoolConnection): void {
    this.connection = connection
    this.from = this.pool()
    holding(this.from).count++
  }

  /**
   * A statement. The first of a transaction begins it. Outside a transaction on a connection of the transactions'
   * pool (a `db.connection()` whose first statement was a transaction's), where autocommit is off, the statement is
   * committed (or rolled back) by itself after it, as on any other connection.
   */
  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.transaction === 'begun') this.transaction = 'open'
    if (this.transaction === 'open' || this.from !== this.pools.transactions) return this.run<R>(query)
    return this.committedAlone<R>(query)
  }

  private async committedAlone<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    try {
      const result = await this.run<R>(query)
      await this.control(COMMIT)
      return result
    } catch (err) {
      if (!this.broken) await this.control(ROLLBACK).catch(() => {})
      throw err
    }
  }

  /**
   * A statement of transaction control (set transaction, begin, commit, rollback). One that failed leaves the
   * connection's transaction unknown, so the connection is broken (destroyed): it never goes back to the pool with a
   * transaction open, and what the session would send after it fails rather than being lost.
   */
  control(query: CompiledQuery): Promise<void> {
    return this.run(query).then(() => undefined, (err: unknown) => {
      this.break()
      throw err
    })
  }

  /** One round trip, whatever the transaction's state. */
  run<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.broken) return Promise.reject(new DatabaseTimeout('A statement on this connection', this.timeoutMs))
    return statement(query.sql, () => within(this, query.sql, query.parameters)) as Promise<QueryResult<R>>
  }

  async *streamQuery<R>(query: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    const connection = this.connection ?? (await this.bind())
    if (this.transaction === 'begun') this.transaction = 'open'
    const alone = this.transaction === 'none' && this.from === this.pools.transactions
    try {
      for await (const row of connection.query(query.sql, query.parameters as unknown[]).stream({ objectMode: true })) {
        yield { rows: [row as R] }
      }
    } finally {
      // Also when the reader stops early or the stream fails: the connection must not go back with the read open.
      if (alone && !this.broken) await this.control(COMMIT)
    }
  }

  bind(): Promise<PoolConnection> {
    return within(this, 'do 0', []).then(() => this.connection!)
  }

  /**
   * Ends the transaction with COMMIT or ROLLBACK: nothing to send when no statement began it, when its first
   * statement never got a connection, or on a broken connection (the server rolled its transaction back when it went).
   */
  async end(how: CompiledQuery): Promise<void> {
    try {
      if (this.transaction === 'open' && this.connection && !this.broken) await this.control(how)
    } finally {
      this.transaction = 'none'
    }
  }

  break(): void {
    this.broken = true
    this.connection?.destroy()
  }

  /**
   * Back to its pool, or destroyed if a transaction is still open on it (released without a commit or a rollback):
   * the next session must not find one there.
   */
  release(): void {
    if (this.connection) {
      if (this.transaction === 'open' && !this.broken) this.connection.destroy()
      else this.connection.release()
      holding(this.from!).count--
    }
    this.connection = undefined
    this.from = undefined
    this.broken = false
    this.transaction = 'none'
  }
}

/** A savepoint name as an identifier: Kysely passes the caller's name through. */
const savepointName = (name: string) => '`' + name.replace(/`/g, '``') + '`'

/** The rows of one statement run on a pooled connection, outside Kysely's executor, within the same deadline. */
export function readRows<Rows>(pools: Pools, timeoutMs: number, sql: string, parameters: readonly unknown[]): Promise<Rows> {
  const session = new Session(pools, timeoutMs)
  return statement(sql, () => within(session, sql, parameters)).then(
    // The driver's rows, typed by the query that was compiled into `sql` (as Kysely types every result).
    (result) => { session.release(); return result.rows as Rows },
    (err: unknown) => { session.release(); throw err }
  )
}

/** Released sessions kept for reuse: a session holds nothing once released, so a busy service allocates none. */
const SPARE_SESSIONS = 64

class PreparingMysqlDriver implements Driver {
  private readonly spare: Session[] = []
  constructor(private readonly pools: Pools, private readonly timeoutMs: number) {}
  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    return this.spare.pop() ?? new Session(this.pools, this.timeoutMs)
  }

  /**
   * Nothing is sent: the session takes its connection from the transactions' pool, where autocommit is off, so the
   * transaction begins with its first statement. A session that holds a connection already (`db.connection()`)
   * sends a `begin`, and so do settings (isolation level, access mode): they apply to the next transaction, which
   * begins at once, so that they end with it even if it runs no statement.
   */
  async beginTransaction(session: Session, settings: TransactionSettings): Promise<void> {
    const parts = [
      ...(settings.isolationLevel ? [`isolation level ${settings.isolationLevel}`] : []),
      ...(settings.accessMode ? [settings.accessMode] : [])
    ]
    const setting = parts.length ? CompiledQuery.raw(`set transaction ${parts.join(', ')}`) : undefined
    // A `db.connection()` session that ran statements before holds a connection of the statements' pool.
    const explicit = session.from === session.pools.statements
    session.transaction = 'begun'
    if (setting || explicit) {
      if (setting) await session.control(setting)
      await session.control(BEGIN)
      session.transaction = 'open'
    }
  }

  async commitTransaction(session: Session): Promise<void> {
    await session.end(COMMIT)
  }

  async rollbackTransaction(session: Session): Promise<void> {
    await session.end(ROLLBACK)
  }

  async savepoint(session: Session, name: string): Promise<void> {
    await session.executeQuery(CompiledQuery.raw(`savepoint ${savepointName(name)}`))
  }

  async rollbackToSavepoint(session: Session, name: string): Promise<void> {
    await session.executeQuery(CompiledQuery.raw(`rollback to savepoint ${savepointName(name)}`))
  }

  async releaseSavepoint(session: Session, name: string): Promise<void> {
    await session.executeQuery(CompiledQuery.raw(`release savepoint ${savepointName(name)}`))
  }

  async releaseConnection(session: Session): Promise<void> {
    session.release()
    if (this.spare.length < SPARE_SESSIONS) this.spare.push(session)
  }

  destroy(): Promise<void> {
    const end = (pool: Pool) => new Promise<void>((resolve, reject) => pool.end((err) => (err ? reject(err) : resolve())))
    return Promise.all([end(this.pools.statements), end(this.pools.transactions)]).then(() => {})
  }
}

/**
 * Kysely's MySQL dialect with its own driver over a mysql2 pool. How it differs from Kysely's `MysqlDialect`:
 * - data statements (`select`, `insert`, `update`, `delete`, `with`) run as server-side prepared statements,
 *   kept per connection; everything else goes as text, and so does a data statement when the server is out of
 *   statement slots;
 * - a session binds its pooled connection at its first statement, through callbacks, instead of at acquire
 *   through promises: one statement outside a transaction costs the checkout and the round trip and nothing more;
 * - a transaction runs on a pool of its own whose connections have autocommit off (Pools): it begins with its
 *   first statement, without the round trip of a `begin`, and a transaction that ran no statement sends nothing;
 * - released sessions are reused rather than allocated anew;
 * - every round trip has a deadline (DB_TIMEOUT_MS), the wait for a pooled connection included: a hung server is
 *   answered with DatabaseTimeout (503) at once, and the connection that missed it is destroyed.
 * What it keeps: one connection per Kysely connection from first use to release (so `db.connection()`, session
 * variables and transactions behave as with Kysely's driver), savepoints, streaming, and Kysely's own MySQL
 * query compiler, adapter and introspector. `test/database/mysql-driver.test.ts` pins each of these.
 */
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

export class PreparingMysqlDialect implements Dialect {
  /** `timeoutMs`: the deadline of one round trip, the wait for a pooled connection included. */
  constructor(private readonly pools: Pools, private readonly timeoutMs: number) {}
  createDriver(): Driver {
    return new PreparingMysqlDriver(this.pools, this.timeoutMs)
  }
  createQueryCompiler(): QueryCompiler {
    return new MysqlQueryCompiler()
  }
  createAdapter(): DialectAdapter {
    return new MigrationLockPerDatabase()
  }
  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new MysqlIntrospector(db)
  }
}
