import { sql, type Expression, type ExpressionBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely'
import type { Database } from '../../db/types.js'
import type { UserStatus } from '../../schemas/user.js'
import { selectUsers, type UserRow } from '../accounts/users.js'
import { addressLookupKey, foldedKey } from '../common/text.js'
import type { Db } from '../database/index.js'
import { likeEscape, prefixUpperBound } from '../database/sql.js'

export type NameFilter = { mode: 'exact' | 'prefix' | 'suffix' | 'contains'; text: string }

export interface UserFilters {
  ids?: number[] | undefined
  /** An address as the client gave it: matches any address of the user, case-insensitively. */
  email?: string | undefined
  name?: NameFilter | undefined
  status?: UserStatus | undefined
  /** Restricts the collection to one user (a plain caller sees only itself). */
  onlyId?: number | undefined
  /** A `filter` expression, as a condition on users (filter/index.ts). */
  condition?: Expression<SqlBool> | undefined
}

type UsersQuery = SelectQueryBuilder<Database, 'users' | 'emails', object>

/** The user owning an address (any of its addresses), compared case-insensitively. */
export function findUserByAddress(db: Db, address: string): Promise<UserRow | undefined> {
  const key = addressLookupKey(address)
  if (key === undefined) return Promise.resolve(undefined)
  return selectUsers(db)
    .where('users.id', '=', (eb) => eb.selectFrom('emails as e').select('e.user_id').where('e.address_norm', '=', key))
    .executeTakeFirst()
}

export async function findPasswordHash(db: Db, id: number): Promise<string | undefined> {
  const row = await db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirst()
  return row?.password_hash
}

function applyName(qb: UsersQuery, filter: NameFilter): UsersQuery {
  const text = foldedKey(filter.text)
  const like = likeEscape(text)
  const pattern = { exact: like, prefix: `${like}%`, suffix: `%${like}`, contains: `%${like}%` }[filter.mode]
  // LIKE keeps the match exact on every collation; the range (exact and prefix) lets the index do the work.
  qb = qb.where(sql<boolean>`users.name_search like ${pattern} escape '!'`)
  if (filter.mode === 'exact') qb = qb.where('users.name_search', '=', text)
  if (filter.mode === 'prefix') {
    qb = qb.where('users.name_search', '>=', text).where('users.name_search', '<', prefixUpperBound(text))
  }
  return qb
}

/**
 * The query behind one page of users after `afterId`, in id order, one row more than `limit`. An `email` filter
 * must have a lookup key (listUsers answers the others without a query).
 */
export function listUsersQuery(db: Db, filters: UserFilters, afterId: number, limit: number) {
  let qb: UsersQuery = selectUsers(db)
  if (filters.onlyId !== undefined) qb = qb.where('users.id', '=', filters.onlyId)
  if (filters.ids) qb = qb.where('users.id', 'in', filters.ids)
  if (filters.status) qb = qb.where('users.status', '=', filters.status)
  if (filters.email !== undefined) {
    const key = addressLookupKey(filters.email) ?? ''
    qb = qb.where('users.id', 'in', (eb: ExpressionBuilder<Database, 'users'>) =>
      eb.selectFrom('emails as e').select('e.user_id').where('e.address_norm', '=', key))
  }
  if (filters.name) qb = applyName(qb, filters.name)
  if (filters.condition) qb = qb.where(filters.condition)
  return (qb as ReturnType<typeof selectUsers>)
    .where('users.id', '>', afterId)
    .orderBy('users.id')
    .limit(limit + 1)
}

/** One page of users; fetches one row more than `limit` to tell whether more follow. */
export async function listUsers(db: Db, filters: UserFilters, afterId: number, limit: number): Promise<UserRow[]> {
  if (filters.email !== undefined && addressLookupKey(filters.email) === undefined) return []
  return listUsersQuery(db, filters, afterId, limit).execute()
}

