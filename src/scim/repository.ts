import type { Insertable, Selectable } from 'kysely'
import type { ScimTokensTable } from '../../db/types.js'
import type { FilterNode } from '../filter/index.js'
import { scimUserFilter } from '../filter/index.js'
import { EMAIL_COLUMNS, type EmailRow } from '../accounts/addresses.js'
import { talliedUsers } from '../accounts/tally.js'
import { USER_COLUMNS, type UserRow } from '../accounts/users.js'
import { foldedKey } from '../common/text.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

export type ScimTokenRow = Omit<Selectable<ScimTokensTable>, 'token_hash' | 'created_by'>

/** An address as SCIM shows it: its value, whether it is the primary, and its id (in the user's version). */
const SCIM_EMAIL_COLUMNS = ['id', 'user_id', 'address', 'primary_user_id'] as const
type ScimEmailRow = Pick<EmailRow, typeof SCIM_EMAIL_COLUMNS[number]>

/** A user as SCIM shows it: the account's row and every address. */
export type ScimUserRow = UserRow & { emails: ScimEmailRow[] }

const SCIM_TOKEN_COLUMNS = ['id', 'description', 'created_at', 'last_used_at'] as const

export async function insertScimToken(db: Db, values: Insertable<ScimTokensTable>): Promise<number> {
  const result = await db.insertInto('scim_tokens').values(values).executeTakeFirstOrThrow()
  return Number(result.insertId)
}

export function findScimToken(db: Db, id: number): Promise<ScimTokenRow | undefined> {
  return db.selectFrom('scim_tokens').select(SCIM_TOKEN_COLUMNS).where('id', '=', id).executeTakeFirst()
}

/** A page of SCIM tokens, newest first, before the id `before` (0: from the newest). */
export function listScimTokens(db: Db, before: number, limit: number): Promise<ScimTokenRow[]> {
  let q = db.selectFrom('scim_tokens').select(SCIM_TOKEN_COLUMNS).orderBy('id', 'desc').limit(limit)
  if (before > 0) q = q.where('id', '<', before)
  return q.execute()
}

export async function deleteScimToken(db: Db, id: number): Promise<boolean> {
  const result = await db.deleteFrom('scim_tokens').where('id', '=', id).executeTakeFirst()
  return Number(result.numDeletedRows) === 1
}

/** The users SCIM shows: those whose deletion is not scheduled (such a user is gone but for the API's admins). */
function scimUsers(db: Db | Trx) {
  return db.selectFrom('users').where('users.deletion_scheduled_at', 'is', null)
}

function selectScimUsers(db: Db | Trx) {
  return scimUsers(db).leftJoin('emails', 'emails.primary_user_id', 'users.id').select(USER_COLUMNS)
}

/** The addresses of these users, in one query, grouped by user in the order they were added. */
async function withEmails<R extends { id: number }>(db: Db | Trx, rows: R[]): Promise<Array<R & { emails: ScimEmailRow[] }>> {
  if (rows.length === 0) return []
  const emails = await db.selectFrom('emails').select(SCIM_EMAIL_COLUMNS).where('user_id', 'in', rows.map((r) => r.id)).orderBy('id').execute()
  const byUser = new Map<number, ScimEmailRow[]>()
  for (const e of emails) {
    const own = byUser.get(e.user_id)
    if (own) own.push(e)
    else byUser.set(e.user_id, [e])
  }
  return rows.map((r) => ({ ...r, emails: byUser.get(r.id) ?? [] }))
}

export async function findScimUser(db: Db | Trx, id: number): Promise<ScimUserRow | undefined> {
  const row = await selectScimUsers(db).where('users.id', '=', id).executeTakeFirst()
  return row && (await withEmails(db, [row]))[0]
}

/**
 * One page of the users a filter selects, in id order, from `offset`, and how many it selects in all. A page that
 * ends short tells the total itself (a directory's lookup of one user is one query); a full or empty one counts, or
 * without a filter reads the tally (a directory paging through every user would otherwise count them once a page).
 */
export async function listScimUsers(db: Db, filter: FilterNode | undefined, offset: number, count: number): Promise<{ total: number; rows: ScimUserRow[] }> {
  const where = filter ? scimUserFilter(filter) : undefined
  let page = selectScimUsers(db).orderBy('users.id').limit(count).offset(offset)
  if (where) page = page.where(where)
  const rows = count === 0 ? [] : await page.execute()
  if (rows.length > 0 && rows.length < count) return { total: offset + rows.length, rows: await withEmails(db, rows) }
  const total = where ? await countUsers(db, where) : await talliedUsers(db)
  return { total, rows: await withEmails(db, rows) }
}

async function countUsers(db: Db, where: ReturnType<typeof scimUserFilter>): Promise<number> {
  const row = await scimUsers(db).select((eb) => eb.fn.countAll<number | string | bigint>().as('n')).where(where).executeTakeFirstOrThrow()
  return Number(row.n)
}

/** The user holding this external id, locked (MySQL). */
export async function userWithExternalId(trx: Trx, externalId: string): Promise<number | undefined> {
  let q = trx.selectFrom('users').select('id').where('external_id', '=', externalId)
  if (locksRows(trx)) q = q.forUpdate()
  return (await q.executeTakeFirst())?.id
}

/** The user holding this address, if any (case-insensitive). */
export async function userWithAddress(trx: Trx, address: string): Promise<number | undefined> {
  let q = trx.selectFrom('emails').select('user_id').where('address_norm', '=', foldedKey(address))
  if (locksRows(trx)) q = q.forUpdate()
  return (await q.executeTakeFirst())?.user_id
}

/** The user's addresses, locked (MySQL). */
export function lockAddresses(trx: Trx, userId: number): Promise<EmailRow[]> {
  let q = trx.selectFrom('emails').select(EMAIL_COLUMNS).where('user_id', '=', userId).orderBy('id')
  if (locksRows(trx)) q = q.forUpdate()
  return q.execute()
}

export async function readBan(trx: Trx, userId: number) {
  return trx.selectFrom('users').select(['external_id', 'ban_reason']).where('id', '=', userId).executeTakeFirstOrThrow()
}
