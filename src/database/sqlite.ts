import type SQLite from 'better-sqlite3'
import type { SqliteDatabase, SqliteStatement } from 'kysely'
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
