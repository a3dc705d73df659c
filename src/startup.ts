import type { Config } from '../schemas/config.js'

interface SystemError { code?: unknown }

/** Where DATABASE_URL points, without its password. */
function databaseTarget(url: string | undefined): string {
  if (!url || url.startsWith('sqlite:')) return 'the embedded SQLite file'
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || 3306}, database "${u.pathname.slice(1)}"`
  } catch {
    return 'the database it names'
  }
}

/**
 * What went wrong at start, in one line that names the setting to change, for the errors an operator meets:
 * the database missing or out of reach (while the app is built), the address or port not to be had (while it starts
 * listening). Undefined for anything else.
 */
export function startupMessage(err: unknown, config: Config, phase: 'build' | 'listen'): string | undefined {
  const e = err as SystemError
  const code = typeof e?.code === 'string' ? e.code : ''
  const db = databaseTarget(config.DATABASE_URL)
  // The database is first reached when the app becomes ready, which may be inside listen: its errors are told apart
  // from the listener's by what failed (a listener's error names `listen`, or the HOST it tried to resolve).
  const listener = (e as { syscall?: unknown }).syscall === 'listen' || (e as { hostname?: unknown }).hostname === config.HOST
  if (phase === 'listen' && listener) {
    switch (code) {
      case 'EADDRINUSE':
        return `PORT=${config.PORT} is in use on ${config.HOST}: stop what holds it, or set PORT to a free port`
      case 'ENOTFOUND':
      case 'EAI_AGAIN':
      case 'EADDRNOTAVAIL':
      case 'EINVAL':
        return `HOST=${config.HOST} is not an address of this machine: set HOST to one (127.0.0.1, 0.0.0.0, ::)`
      case 'EACCES':
        return `PORT=${config.PORT}: not allowed to listen there (ports below 1024 need privileges): set PORT to 1024 or above`
      default:
        return undefined
    }
  }
  switch (code) {
    case 'ER_BAD_DB_ERROR':
      return `DATABASE_URL names a database that does not exist (${db}): create it (create database … character set utf8mb4) or correct DATABASE_URL`
    case 'ER_ACCESS_DENIED_ERROR':
    case 'ER_ACCESS_DENIED_NO_PASSWORD_ERROR':
    case 'ER_DBACCESS_DENIED_ERROR':
      return `DATABASE_URL: the server refused the user or password (${db})`
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ETIMEDOUT':
    case 'DB_TIMEOUT':
      return `DATABASE_URL: cannot reach MySQL at ${db} (${code}); is it running, and is DATABASE_URL right?`
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `DATABASE_URL: the host name does not resolve (${db})`
    case 'SQLITE_CANTOPEN':
      return `DATABASE_URL: cannot open the SQLite file it names (${config.DATABASE_URL ?? 'the default under ./data/'}): check the path and its permissions`
    default:
      return undefined
  }
}
