import { addressLookupKey } from '../common/text.js'
import type { Db, DirectRead, Trx } from '../database/index.js'
import type { UserRow } from '../users/repository.js'

export type Caller = UserRow & { tokenHash: string }

export async function insertToken(db: Db, userId: number, hash: string, now: number, expiresAt: number): Promise<void> {
  await db.insertInto('tokens').values({ token_hash: hash, user_id: userId, created_at: now, expires_at: expiresAt }).execute()
}

/**
 * The caller a token belongs to, with its whole user row and primary address, in one indexed query: expired tokens
 * and banned users resolve to nobody. For the hot path, the query is built and compiled once; each request only
 * executes it with its own values, through the database's direct read (no executor around it).
 */
export function callerLookup(db: Db, read: DirectRead): (hash: string) => Promise<Caller | undefined> {
  const HASH = '\u0000hash'
  const NOW = -1
  const compiled = callerQuery(db, HASH, NOW).compile()
  const template = [...compiled.parameters]
  const hashAt = template.indexOf(HASH)
  const nowAt = template.indexOf(NOW)
  if (hashAt < 0 || nowAt < 0) throw new Error('callerLookup: the compiled query lost a parameter')
  return async (hash) => {
    const parameters = template.slice()
    parameters[hashAt] = hash
    parameters[nowAt] = Date.now()
    const row = (await read<Caller>(compiled.sql, parameters))[0]
    if (row) row.tokenHash = hash
    return row
  }
}

export function callerQuery(db: Db, hash: string, now: number) {
  return db
    .selectFrom('tokens')
    .innerJoin('users', 'users.id', 'tokens.user_id')
    .leftJoin('emails', 'emails.primary_user_id', 'users.id')
    .select([
      'users.id', 'users.name', 'emails.address as email', 'users.status', 'users.role',
      'users.version', 'users.created_at', 'users.updated_at'
    ])
    .where('tokens.token_hash', '=', hash)
    .where('tokens.expires_at', '>', now)
    .where('users.status', '=', 'ACTIVE')
}

/** What a password is checked against: the user owning an address (any of its addresses). */
export function findCredentials(db: Db, address: string) {
  return db
    .selectFrom('emails')
    .innerJoin('users', 'users.id', 'emails.user_id')
    .select(['users.id', 'users.password_hash', 'users.status'])
    .where('emails.address_norm', '=', addressLookupKey(address) ?? '')
    .executeTakeFirst()
}

export async function deleteToken(db: Db, hash: string): Promise<void> {
  await db.deleteFrom('tokens').where('token_hash', '=', hash).execute()
}

/** Revokes a user's tokens, all of them or all but one. */
export async function deleteUserTokens(trx: Trx, userId: number, except?: string): Promise<void> {
  let del = trx.deleteFrom('tokens').where('user_id', '=', userId)
  if (except !== undefined) del = del.where('token_hash', '!=', except)
  await del.execute()
}

/** Drops a user's expired tokens (refused anyway), at each of its logins, so they cannot pile up. */
export async function purgeExpiredTokens(db: Db, userId: number, now: number): Promise<void> {
  await db.deleteFrom('tokens').where('user_id', '=', userId).where('expires_at', '<=', now).execute()
}
