import { setTimeout as pause } from 'node:timers/promises'
import type SQLite from 'better-sqlite3'
import { SqliteDialect, SqliteDriver, type CompiledQuery, type DatabaseConnection, type Driver, type QueryResult, type SqliteDatabase, type SqliteStatement } from 'kysely'
import { statementSync, tracing } from '../tracing/spans.js'
import { isSqliteBusy } from './errors.js'

/**
 * How long SQLite waits for another process's write lock inside a statement: the driver is synchronous, so that
 * wait stops the whole service, its health probes and every other request with it. Kept short; the rest of the
 * wait is BUSY_WAIT_MS, spent between attempts, with the service answering meanwhile.
 */
export const BUSY_TIMEOUT_MS = 10

/**
 * How long a write waits, in all, for another process (an operator's shell, a script) to let go of the file's
 * write lock, before its request is answered 503: a statement outside a transaction is run again (below), a
 * transaction as a whole (transaction.ts).
 */
export const BUSY_WAIT_MS = 5000

/**
 * Kysely's SQLite dialect, but a statement run outside a transaction that finds the file's write lock taken by
 * another process is run again after a pause, for up to BUSY_WAIT_MS, instead of waiting inside SQLite's busy
 * handler with the event loop stopped. Inside a transaction the statement fails at once: its snapshot may be stale,
 * so the transaction is run again as a whole (inTransaction).
 */
export class PatientSqliteDialect extends SqliteDialect {
  readonly #database: SQLite.Database
  readonly #statements: SqliteDatabase

  constructor(database: SQLite.Database, statements: SqliteDatabase) {
    super({ database: statements })
    this.#database = database
    this.#statements = statements
  }

  override createDriver(): Driver {
    return new PatientSqliteDriver(this.#database, this.#statements)
  }
}

/**
 * The one connection, taken in turn (first come, first served), as Kysely's own driver does it; but a statement that
 * waits for another process's lock gives its turn up during each pause, so that the reads, the probes and the other
 * writes go on meanwhile, each write with a wait of its own. Kysely's SQLite connection runs a statement at once and
 * throws SQLite's error as it comes, so a statement that succeeds pays nothing for this.
 */
class PatientSqliteDriver extends SqliteDriver {
  readonly #database: SQLite.Database
  readonly #turn = new Turn()
  #connection: DatabaseConnection | undefined
  #closing = false

  constructor(database: SQLite.Database, statements: SqliteDatabase) {
    super({ database: statements })
    this.#database = database
  }

  /** Kysely's driver opens the one connection; it is taken from it once, and handed out in turn from here on. */
  override async init(): Promise<void> {
    await super.init()
    const connection = await super.acquireConnection()
    await super.releaseConnection()
    this.#connection = this.#patient(connection)
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    await this.#turn.take()
    return this.#connection!
  }

  override async releaseConnection(): Promise<void> {
    this.#turn.give()
  }

  /** Closes the file once the statement running has ended; one waiting for a lock then ends unavailable (503). */
  override async destroy(): Promise<void> {
    this.#closing = true
    await this.#turn.take()
    try {
      await super.destroy()
    } finally {
      this.#turn.give()
    }
  }

  #patient(connection: DatabaseConnection): DatabaseConnection {
    const database = this.#database
    const waiting = async (query: CompiledQuery, first: unknown): Promise<QueryResult<unknown>> => {
      const until = Date.now() + BUSY_WAIT_MS
      let err = first
      for (let delay = 5; Date.now() < until; delay = Math.min(100, delay * 2)) {
        this.#turn.give()
        await pause(delay)
        await this.#turn.take()
        if (this.#closing) break
        try {
          return await connection.executeQuery(query)
        } catch (again) {
          if (!isSqliteBusy(again) || database.inTransaction) throw again
          err = again
        }
      }
      throw err
    }
    return {
      executeQuery<R>(query: CompiledQuery) {
        try {
          return connection.executeQuery<R>(query)
        } catch (err) {
          if (!isSqliteBusy(err) || database.inTransaction) throw err
          return waiting(query, err) as Promise<QueryResult<R>>
        }
      },
      streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize)
    }
  }
}

/** One holder at a time, the others served in the order they asked. Taking a free turn allocates nothing. */
class Turn {
  #held = false
  readonly #waiting: Array<() => void> = []

  take(): Promise<void> | undefined {
    if (!this.#held) {
      this.#held = true
      return undefined
    }
    return new Promise((resolve) => this.#waiting.push(resolve))
  }

  /** Hands the turn to the next in line, or frees it. */
  give(): void {
    const next = this.#waiting.shift()
    if (next) next()
    else this.#held = false
  }
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
      return tracing() ? traced(sql, statement) : statement
    },
    close() {
      statements.clear()
      sqlite.close()
    }
  }
}

/** A statement whose runs are spans (tracing on). */
function traced(sql: string, statement: SQLite.Statement): SqliteStatement {
  return {
    reader: statement.reader,
    all: (parameters) => statementSync(sql, () => statement.all(parameters)),
    run: (parameters) => statementSync(sql, () => statement.run(parameters)),
    iterate: (parameters) => statementSync(sql, () => statement.iterate(parameters))
  }
}
