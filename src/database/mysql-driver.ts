import {
  CompiledQuery, MysqlAdapter, MysqlIntrospector, MysqlQueryCompiler,
  type DatabaseConnection, type DatabaseIntrospector, type Dialect, type DialectAdapter, type Driver, type Kysely,
  type QueryCompiler, type QueryResult, type TransactionSettings
} from 'kysely'
import type { ExecuteValues, Pool, PoolConnection, QueryError } from 'mysql2'

/** Statements sent as server-side prepared statements; everything else (DDL, transaction control) goes as text. */
const PREPARED = /^\s*(select|insert|update|delete|with)\b/i

/** MariaDB and MySQL refuse more prepared statements than max_prepared_stmt_count (16 382 by default), server-wide. */
const TOO_MANY_STATEMENTS = 'ER_MAX_PREPARED_STMT_COUNT_REACHED'

type Runner = Pick<Pool, 'query' | 'execute'>
type Row = Record<string, unknown>
type Packet = { insertId?: number; affectedRows?: number; changedRows?: number }

/**
 * Runs one statement: data statements as prepared statements (the server parses and plans the text once per
 * connection, and values travel in binary), the rest as text. A server out of statement slots gets the text form.
 */
function run(on: Runner, sql: string, parameters: readonly unknown[]): Promise<QueryResult<Row>> {
  const prepared = PREPARED.test(sql)
  return new Promise((resolve, reject) => {
    const done = (err: QueryError | null, result: unknown) => {
      if (!err) return resolve(toQueryResult(result))
      if (prepared && err.code === TOO_MANY_STATEMENTS) return on.query(sql, parameters as unknown[], done)
      reject(err)
    }
    if (prepared) on.execute(sql, parameters as ExecuteValues[], done)
    else on.query(sql, parameters as unknown[], done)
  })
}

/** The rows of one statement run on the pool (prepared, for a data statement), outside Kysely's executor. */
export function readRows<R>(pool: Pool, sql: string, parameters: readonly unknown[]): Promise<R[]> {
  return run(pool, sql, parameters).then((result) => result.rows as R[])
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

/**
 * What Kysely calls a connection: one pooled connection, bound at its first statement (not at acquire, so that an
 * acquired session costs nothing until it is used) and held until Kysely releases the session. A single statement
 * therefore costs one checkout, one round trip and one release, all through mysql2's callbacks with one promise;
 * `db.connection()` and a transaction get the same connection for every statement, as Kysely's contract says.
 */
class Session implements DatabaseConnection {
  connection: PoolConnection | undefined
  constructor(readonly pool: Pool) {}

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.connection) return run(this.connection, query.sql, query.parameters) as Promise<QueryResult<R>>
    return new Promise((resolve, reject) => {
      this.pool.getConnection((err, connection) => {
        if (err) return reject(err)
        this.connection = connection
        run(connection, query.sql, query.parameters).then(resolve as (r: QueryResult<Row>) => void, reject)
      })
    })
  }

  async *streamQuery<R>(query: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    const connection = this.connection ?? (await this.bind())
    for await (const row of connection.query(query.sql, query.parameters as unknown[]).stream({ objectMode: true })) {
      yield { rows: [row as R] }
    }
  }

  bind(): Promise<PoolConnection> {
    return new Promise((resolve, reject) => {
      this.pool.getConnection((err, connection) => {
        if (err) return reject(err)
        this.connection = connection
        resolve(connection)
      })
    })
  }

  release(): void {
    this.connection?.release()
    this.connection = undefined
  }
}

/** A savepoint name as an identifier: Kysely passes the caller's name through. */
const savepointName = (name: string) => '`' + name.replace(/`/g, '``') + '`'

/** Released sessions kept for reuse: a session holds nothing once released, so a busy service allocates none. */
const SPARE_SESSIONS = 64

class PreparingMysqlDriver implements Driver {
  private readonly spare: Session[] = []
  constructor(private readonly pool: Pool) {}
  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    return this.spare.pop() ?? new Session(this.pool)
  }

  async beginTransaction(session: Session, settings: TransactionSettings): Promise<void> {
    const connection = session.connection ?? (await session.bind())
    const parts = [
      ...(settings.isolationLevel ? [`isolation level ${settings.isolationLevel}`] : []),
      ...(settings.accessMode ? [settings.accessMode] : [])
    ]
    if (parts.length) await run(connection, `set transaction ${parts.join(', ')}`, [])
    await run(connection, 'begin', [])
  }

  async commitTransaction(session: Session): Promise<void> {
    await session.executeQuery(CompiledQuery.raw('commit'))
  }

  async rollbackTransaction(session: Session): Promise<void> {
    await session.executeQuery(CompiledQuery.raw('rollback'))
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
    return new Promise((resolve, reject) => this.pool.end((err) => (err ? reject(err) : resolve())))
  }
}

/**
 * Kysely's MySQL dialect with its own driver over a mysql2 pool. How it differs from Kysely's `MysqlDialect`:
 * - data statements (`select`, `insert`, `update`, `delete`, `with`) run as server-side prepared statements,
 *   kept per connection; everything else goes as text, and so does a data statement when the server is out of
 *   statement slots;
 * - a session binds its pooled connection at its first statement, through callbacks, instead of at acquire
 *   through promises: one statement outside a transaction costs the checkout and the round trip and nothing more;
 * - released sessions are reused rather than allocated anew.
 * What it keeps: one connection per Kysely connection from first use to release (so `db.connection()`, session
 * variables and transactions behave as with Kysely's driver), savepoints, streaming, and Kysely's own MySQL
 * query compiler, adapter and introspector. `test/database/mysql-driver.test.ts` pins each of these.
 */
export class PreparingMysqlDialect implements Dialect {
  constructor(private readonly pool: Pool) {}
  createDriver(): Driver {
    return new PreparingMysqlDriver(this.pool)
  }
  createQueryCompiler(): QueryCompiler {
    return new MysqlQueryCompiler()
  }
  createAdapter(): DialectAdapter {
    return new MysqlAdapter()
  }
  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new MysqlIntrospector(db)
  }
}
