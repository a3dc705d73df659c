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

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

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

class PatientSqliteDriver extends SqliteDriver {
  readonly #database: SQLite.Database
  #patient: DatabaseConnection | undefined

  constructor(database: SQLite.Database, statements: SqliteDatabase) {
    super({ database: statements })
    this.#database = database
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const connection = await super.acquireConnection()
    this.#patient ??= patient(connection, this.#database)
    return this.#patient
  }
}

/**
 * The one connection, its statements outside a transaction run again while another process holds the lock. Kysely's
 * SQLite connection runs a statement at once and throws SQLite's error as it comes, so a statement that succeeds
 * pays nothing here. A statement waiting keeps the connection (the direct reads do not need it, database/index.ts).
 */
function patient(connection: DatabaseConnection, database: SQLite.Database): DatabaseConnection {
  const waiting = async (query: CompiledQuery, first: unknown): Promise<QueryResult<unknown>> => {
    let err = first
    for (let waited = 0, delay = 5; waited < BUSY_WAIT_MS; waited += delay, delay = Math.min(100, delay * 2)) {
      await pause(delay)
      try {
        return await connection.executeQuery(query)
      } catch (again) {
        if (!isSqliteBusy(again)) throw again
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
