import { USER_COLUMNS } from '../accounts/users.js'
import type { Db, DirectRead } from '../database/index.js'
import { compiledOnce } from '../database/compiled.js'

/**
 * The caller a token belongs to, with its whole user row and primary address, in one indexed query: expired tokens
 * and banned users resolve to nobody.
 */
export function callerQuery(db: Db, hash: string, now: number) {
  return db
    .selectFrom('tokens')
    .innerJoin('users', 'users.id', 'tokens.user_id')
    .leftJoin('emails', 'emails.primary_user_id', 'users.id')
    .select([...USER_COLUMNS, 'tokens.session_id'])
    .where('tokens.token_hash', '=', hash)
    .where('tokens.expires_at', '>', now)
    .where('users.status', '=', 'ACTIVE')
}

type CallerRow = Awaited<ReturnType<ReturnType<typeof callerQuery>['executeTakeFirstOrThrow']>>

/** The authenticated caller: its user row, the token it called with, and the session that token belongs to. */
export type Caller = CallerRow & { tokenHash: string }

/** A caller found by its token hash: at once where the database answers at once (SQLite), else with a promise. */
export type FindCaller = (hash: string) => Caller | undefined | Promise<Caller | undefined>

/** The caller lookup of every authenticated request: compiled once, run through the database's direct read. */
export function callerLookup(db: Db, read: DirectRead): FindCaller {
  const run = compiledOnce(read, (hash: string, now: number) => callerQuery(db, hash, now), ['\u0000hash', -1])
  const callerOf = (rows: CallerRow[], hash: string): Caller | undefined => rows[0] && Object.assign(rows[0], { tokenHash: hash })
  return (hash) => {
    const rows = run(hash, Date.now())
    return rows instanceof Promise ? rows.then((found) => callerOf(found, hash)) : callerOf(rows, hash)
  }
}
