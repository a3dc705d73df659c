import { addressLookupKey } from '../common/text.js'
import type { Db, DirectRead, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'
import type { UserRow } from '../users/repository.js'

/** The authenticated caller: its user row, the token it called with, and the session that token belongs to. */
export type Caller = UserRow & { tokenHash: string; session_id: number | null }

export async function insertToken(trx: Trx, userId: number, sessionId: number, hash: string, now: number, expiresAt: number): Promise<void> {
  await trx.insertInto('tokens').values({ token_hash: hash, user_id: userId, session_id: sessionId, created_at: now, expires_at: expiresAt }).execute()
}

/** A caller found by its token hash: at once where the engine answers synchronously (SQLite), else a promise. */
export type FindCaller = (hash: string) => Caller | undefined | Promise<Caller | undefined>

/**
 * The caller a token belongs to, with its whole user row and primary address, in one indexed query: expired tokens
 * and banned users resolve to nobody. For the hot path, the query is built and compiled once; each request only
 * executes it with its own values, through the database's direct read (no executor around it, and no promise where
 * the engine needs none).
 */
export function callerLookup(db: Db, read: DirectRead): FindCaller {
  const HASH = '\u0000hash'
  const NOW = -1
  const compiled = callerQuery(db, HASH, NOW).compile()
  const template = [...compiled.parameters]
  const hashAt = template.indexOf(HASH)
  const nowAt = template.indexOf(NOW)
  if (hashAt < 0 || nowAt < 0) throw new Error('callerLookup: the compiled query lost a parameter')
  const first = (rows: Caller[], hash: string) => {
    const row = rows[0]
    if (row) row.tokenHash = hash
    return row
  }
  return (hash) => {
    const parameters = template.slice()
    parameters[hashAt] = hash
    parameters[nowAt] = Date.now()
    const rows = read<Caller>(compiled.sql, parameters)
    return rows instanceof Promise ? rows.then((r) => first(r, hash)) : first(rows, hash)
  }
}

export function callerQuery(db: Db, hash: string, now: number) {
  return db
    .selectFrom('tokens')
    .innerJoin('users', 'users.id', 'tokens.user_id')
    .leftJoin('emails', 'emails.primary_user_id', 'users.id')
    .select([
      'users.id', 'users.name', 'emails.address as email', 'users.status', 'users.role',
      'users.version', 'users.created_at', 'users.updated_at', 'tokens.session_id'
    ])
    .where('tokens.token_hash', '=', hash)
    .where('tokens.expires_at', '>', now)
    .where('users.status', '=', 'ACTIVE')
}

/**
 * What a password is checked against: the user owning an address that may log in, its primary address or any of
 * its verified ones. An unverified secondary address finds nobody, as an unknown one does.
 */
export function findCredentials(db: Db, address: string) {
  return db
    .selectFrom('emails')
    .innerJoin('users', 'users.id', 'emails.user_id')
    .select(['users.id', 'users.password_hash', 'users.status'])
    .where('emails.address_norm', '=', addressLookupKey(address) ?? '')
    .where((eb) => eb.or([eb('emails.primary_user_id', 'is not', null), eb('emails.verified_at', 'is not', null)]))
    .executeTakeFirst()
}

export async function deleteToken(db: Db | Trx, hash: string): Promise<void> {
  await db.deleteFrom('tokens').where('token_hash', '=', hash).execute()
}

/** Drops a user's expired access tokens (refused anyway), at each of its logins, so they cannot pile up. */
export async function purgeExpiredTokens(trx: Trx, userId: number, now: number): Promise<void> {
  await trx.deleteFrom('tokens').where('user_id', '=', userId).where('expires_at', '<=', now).execute()
}

/**
 * What a token may be issued against, read with the user row locked (MySQL) for the rest of the transaction: every
 * change that ends sessions (a new password, a ban, a demotion, a deletion) writes this row first, so a login or
 * refresh and such a change are serialised, and a token is issued only against the state the change left.
 */
export async function lockCredentials(trx: Trx, userId: number) {
  let q = trx.selectFrom('users').select(['id', 'password_hash', 'status']).where('id', '=', userId)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}
