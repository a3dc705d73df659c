import { USER_COLUMNS } from '../accounts/users.js'
import type { Db } from '../database/index.js'

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

/** A caller found by its token hash. */
export type FindCaller = (hash: string) => Promise<Caller | undefined>

/**
 * The caller lookup of every authenticated request. Its query is built and compiled once, then run with each call's
 * token and time: building it anew was the largest part of an authenticated read's own work (ARCHITECTURE.md).
 */
export function callerLookup(db: Db): FindCaller {
  const compiled = callerQuery(db, HASH_SLOT, NOW_SLOT).compile()
  const [hashAt, nowAt] = [compiled.parameters.indexOf(HASH_SLOT), compiled.parameters.indexOf(NOW_SLOT)]
  return async (hash) => {
    const parameters = [...compiled.parameters]
    parameters[hashAt] = hash
    parameters[nowAt] = Date.now()
    const row = (await db.executeQuery<CallerRow>({ ...compiled, parameters })).rows[0]
    return row && { ...row, tokenHash: hash }
  }
}

/** The values the compiled caller query holds the places of: no token hash or time is either. */
const [HASH_SLOT, NOW_SLOT] = ['\0token-hash', -1]

/** A SCIM token's id by its hash, or undefined (unknown or deleted). */
export type FindScimToken = (hash: string) => Promise<number | undefined>

/** Its last use is written at most this often: a provider's burst of requests costs one write. */
const LAST_USE_EVERY_MS = 60_000

/** The lookup of a SCIM token on /scim/v2, recording its use. */
export function scimTokenLookup(db: Db): FindScimToken {
  return async (hash) => {
    const row = await db.selectFrom('scim_tokens').select(['id', 'last_used_at']).where('token_hash', '=', hash).executeTakeFirst()
    if (!row) return undefined
    const now = Date.now()
    if (row.last_used_at === null || row.last_used_at < now - LAST_USE_EVERY_MS) {
      await db.updateTable('scim_tokens').set({ last_used_at: now }).where('id', '=', row.id).execute()
    }
    return row.id
  }
}
