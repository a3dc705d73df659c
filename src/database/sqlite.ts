import type SQLite from 'better-sqlite3'
import { CompiledQuery, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDatabase, type SqliteDialectConfig, type SqliteStatement } from 'kysely'
import { statementSync, tracing } from '../tracing/spans.js'

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

/**
 * Kysely's SQLite dialect, its transactions begun IMMEDIATE. A transaction begun as SQLite begins by default
 * (deferred) reads from a snapshot and asks for the write lock only at its first write: if another process wrote to
 * the file in between (an operator's shell, a script, a second service on the same file), that write fails with
 * SQLITE_BUSY_SNAPSHOT, which waiting cannot mend. Begun IMMEDIATE, it takes the write lock first, waiting for
 * another writer as `busy_timeout` allows, and reads what is current. Within the service nothing changes: the one
 * connection runs one transaction at a time, and readers (the direct read, other processes) never wait for a writer.
 */
export class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly config: SqliteDialectConfig) {
    super(config)
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.config)
  }
}

class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'))
  }
}
