import { sql, type ExpressionBuilder, type SelectQueryBuilder } from 'kysely'
import type { Database } from '../../db/types.js'
import type { UserRole, UserStatus } from '../../schemas/user.js'
import { inTransaction, isUniqueViolation } from '../database.js'
import { emailTaken, preconditionFailed, userNotFound } from '../lib/errors.js'
import { addressLookupKey, nameSearchKey, normalizeAddress } from '../lib/text.js'
import { likeEscape, locksRows, prefixUpperBound, type Db } from './sql.js'

export interface UserRow {
  id: number
  name: string
  email: string | null
  status: UserStatus
  role: UserRole
  version: number
  created_at: number
  updated_at: number
}

export type NameFilter = { mode: 'exact' | 'prefix' | 'suffix' | 'contains'; text: string }

export interface UserFilters {
  ids?: number[] | undefined
  /** An address as the client gave it: matches any address of the user, case-insensitively. */
  email?: string | undefined
  name?: NameFilter | undefined
  status?: UserStatus | undefined
  /** Restricts the collection to one user (a plain caller sees only itself). */
  onlyId?: number | undefined
}

/** Versions an If-Match allows: undefined (no precondition), 'any' (`*`), or a list. */
export type Expected = 'any' | number[] | undefined

type UsersQuery = SelectQueryBuilder<Database, 'users' | 'emails', object>

/** Users with their primary address: one indexed join on the unique primary marker. */
export function selectUsers(db: Db) {
  return db
    .selectFrom('users')
    .leftJoin('emails', 'emails.primary_user_id', 'users.id')
    .select([
      'users.id', 'users.name', 'emails.address as email', 'users.status', 'users.role',
      'users.version', 'users.created_at', 'users.updated_at'
    ])
}

export function findUserById(db: Db, id: number): Promise<UserRow | undefined> {
  return selectUsers(db).where('users.id', '=', id).executeTakeFirst()
}

/** The user owning an address (any of its addresses), compared case-insensitively. */
export function findUserByAddress(db: Db, address: string): Promise<UserRow | undefined> {
  const key = addressLookupKey(address)
  if (key === undefined) return Promise.resolve(undefined)
  return selectUsers(db)
    .where('users.id', '=', (eb) => eb.selectFrom('emails as e').select('e.user_id').where('e.address_norm', '=', key))
    .executeTakeFirst()
}

export function findCredentials(db: Db, address: string) {
  return db
    .selectFrom('emails')
    .innerJoin('users', 'users.id', 'emails.user_id')
    .select(['users.id', 'users.password_hash', 'users.status'])
    .where('emails.address_norm', '=', addressLookupKey(address) ?? '')
    .executeTakeFirst()
}

export function findPasswordHash(db: Db, id: number) {
  return db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirst()
}

function applyName(qb: UsersQuery, filter: NameFilter): UsersQuery {
  const text = nameSearchKey(filter.text)
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

export interface NewUserRecord {
  name: string
  email: string
  passwordHash: string
  role: UserRole
  status: UserStatus
}

/** Creates a user and its primary address in one transaction; EMAIL_TAKEN when the address is anyone's already. */
export async function createUser(db: Db, input: NewUserRecord): Promise<UserRow> {
  const now = Date.now()
  try {
    return await inTransaction(db, async (trx) => {
      const inserted = await trx.insertInto('users').values({
        name: input.name,
        name_search: nameSearchKey(input.name),
        password_hash: input.passwordHash,
        status: input.status,
        role: input.role,
        version: 1,
        created_at: now,
        updated_at: now
      }).executeTakeFirstOrThrow()
      const userId = Number(inserted.insertId)
      await trx.insertInto('emails').values({
        user_id: userId,
        address: input.email,
        address_norm: normalizeAddress(input.email),
        primary_user_id: userId,
        version: 1,
        created_at: now,
        updated_at: now
      }).execute()
      return writtenUser(trx, userId)
    })
  } catch (err) {
    if (isUniqueViolation(err)) throw emailTaken(input.email)
    throw err
  }
}

export type UserChanges = Partial<{ name: string; status: UserStatus; role: UserRole; passwordHash: string }>

/**
 * Applies changes to a user, bumping its version, only if the version is one If-Match allows (checked in the
 * same UPDATE, so no other write can slip in between). Banning a user also revokes its tokens; a new password
 * revokes every token but `keepTokenHash`.
 */
export async function updateUser(
  db: Db, id: number, changes: UserChanges, expected: Expected, keepTokenHash?: string
): Promise<UserRow> {
  const now = Date.now()
  const set: Record<string, unknown> = { updated_at: now, version: sql`version + 1` }
  if (changes.name !== undefined) { set.name = changes.name; set.name_search = nameSearchKey(changes.name) }
  if (changes.status !== undefined) set.status = changes.status
  if (changes.role !== undefined) set.role = changes.role
  if (changes.passwordHash !== undefined) set.password_hash = changes.passwordHash
  const revokeTokens = changes.status === 'BANNED' || changes.passwordHash !== undefined

  return inTransaction(db, async (trx) => {
    let update = trx.updateTable('users').set(set).where('id', '=', id)
    if (Array.isArray(expected)) {
      if (expected.length === 0) return await failPrecondition(trx, id)
      update = update.where('version', 'in', expected)
    }
    const result = await update.executeTakeFirst()
    if (result.numUpdatedRows === 0n) return await failPrecondition(trx, id)
    if (revokeTokens) {
      let del = trx.deleteFrom('tokens').where('user_id', '=', id)
      if (keepTokenHash !== undefined) del = del.where('token_hash', '!=', keepTokenHash)
      await del.execute()
    }
    return writtenUser(trx, id)
  })
}

/** The user as this transaction left it (read inside it, before any concurrent delete can land). */
async function writtenUser(trx: Db, id: number): Promise<UserRow> {
  const row = await findUserById(trx, id)
  if (!row) throw new Error(`user ${id} vanished inside its own transaction`)
  return row
}

/** 404 when the user is gone, else 412: the write found the row at another version. */
async function failPrecondition(db: Db, id: number): Promise<never> {
  const exists = await db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst()
  throw exists ? preconditionFailed() : userNotFound(`id ${id}`)
}

/** Deletes a user with its addresses and tokens in one transaction. */
export async function deleteUser(db: Db, id: number, expected: Expected): Promise<void> {
  await inTransaction(db, async (trx) => {
    const row = await lockUser(trx, id)
    if (Array.isArray(expected) && !expected.includes(row.version)) throw preconditionFailed()
    await trx.deleteFrom('tokens').where('user_id', '=', id).execute()
    await trx.deleteFrom('emails').where('user_id', '=', id).execute()
    await trx.deleteFrom('users').where('id', '=', id).execute()
  })
}

/** Locks a user row for the rest of the transaction (MySQL); 404 when there is no such user. */
export async function lockUser(trx: Db, id: number): Promise<{ version: number }> {
  let q = trx.selectFrom('users').select('version').where('id', '=', id)
  if (locksRows(trx)) q = q.forUpdate()
  const row = await q.executeTakeFirst()
  if (!row) throw userNotFound(`id ${id}`)
  return row
}

/** Marks a user's representation as changed (its primary address moved): new version, new ETag. */
export async function touchUser(trx: Db, id: number, now: number): Promise<void> {
  await trx.updateTable('users').set({ version: sql`version + 1`, updated_at: now }).where('id', '=', id).execute()
}
