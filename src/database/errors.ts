/** What the drivers' errors say, read in one place: the rest of Roster asks these questions, never the codes. */

interface DriverError { code?: unknown; errno?: unknown; message?: unknown }

/** A unique index refused the write (MySQL/MariaDB ER_DUP_ENTRY, SQLite constraint). */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as DriverError
  return e?.code === 'ER_DUP_ENTRY' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}

/**
 * SQLite's "busy", in any of its extended codes: another process (a shell, a script) held the file's write lock. A
 * transaction begins deferred, reading from a snapshot; one that meets such a write when it first writes fails at
 * once, with SQLITE_BUSY, or with SQLITE_BUSY_SNAPSHOT when that write has committed since its snapshot, which no
 * wait mends. Run again, it reads afresh. Transactions are not begun IMMEDIATE instead: the idle polls (the
 * sequencer, the outbox) would take the write lock every second to read that there is nothing to do. SQLite's own
 * wait for the lock (`busy_timeout`) stops the whole service, since the driver is synchronous, so it is kept to a
 * few milliseconds and the rest of the wait is spent between attempts (sqlite.ts, transaction.ts).
 */
export function isSqliteBusy(err: unknown): boolean {
  const code = (err as DriverError)?.code
  return typeof code === 'string' && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'))
}

/** A transaction lost a deadlock, a lock wait or SQLite's write lock, and may be retried as a whole. */
export function isRetryable(err: unknown): boolean {
  const e = err as DriverError
  return e?.code === 'ER_LOCK_DEADLOCK' || e?.code === 'ER_LOCK_WAIT_TIMEOUT' || isSqliteBusy(e)
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH',
  'PROTOCOL_CONNECTION_LOST', 'PROTOCOL_SEQUENCE_TIMEOUT', 'ER_CON_COUNT_ERROR', 'POOL_CLOSED', 'DB_TIMEOUT',
  'ER_SERVER_SHUTDOWN', 'SQLITE_IOERR',
  // Galera: a node that is not (yet) part of the primary component, "WSREP has not yet prepared node for application use".
  'ER_UNKNOWN_COM_ERROR'
])

/** The database could not be reached or is saturated: the request may succeed later (503, not 500). */
export function isUnavailable(err: unknown): boolean {
  const e = err as DriverError
  if (typeof e?.code === 'string' && (UNAVAILABLE_CODES.has(e.code) || isSqliteBusy(e))) return true
  // mysql2 and Kysely say some of these only in words: a pool or a connection closed under a request (shutdown).
  return typeof e?.message === 'string' &&
    /Queue limit reached|Pool is closed|connect ETIMEDOUT|connection is in closed state|driver has already been destroyed/.test(e.message)
}
