import { CompiledQuery, sql, type Insertable, type Selectable } from 'kysely'
import type { EmailsTable, ImportErrorsTable, ImportsTable, UsersTable } from '../../db/types.js'
import { EMAIL_COLUMNS } from '../accounts/addresses.js'
import { tallyUsers } from '../accounts/tally.js'
import { foldedKey } from '../common/text.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

export type ImportRow = Selectable<ImportsTable>
export type ImportErrorRow = Omit<Selectable<ImportErrorsTable>, 'import_id'>

export async function insertImport(db: Db, values: Insertable<ImportsTable>): Promise<number> {
  const result = await db.insertInto('imports').values(values).executeTakeFirstOrThrow()
  return Number(result.insertId)
}

/** Stages records of a file, in one multi-row insert. */
export async function stageLines(db: Db, importId: number, lines: Array<{ line: number; body: string }>): Promise<void> {
  if (lines.length) await db.insertInto('import_lines').values(lines.map((l) => ({ import_id: importId, ...l }))).execute()
}

export async function markReceived(db: Db, id: number, lines: number): Promise<void> {
  await db.updateTable('imports').set({ received: 1, total_lines: lines }).where('id', '=', id).execute()
}

export async function markFailed(db: Db, id: number, detail: string, now: number): Promise<void> {
  await db.updateTable('imports').set({ received: 1, status: 'failed', detail: detail.slice(0, 500), finished_at: now, total_lines: 0, lease: null, lease_until: null })
    .where('id', '=', id).execute()
}

/** Drops up to `limit` staged lines of an import: what is done or was never received goes in bounded batches. */
export async function dropLines(db: Db, importId: number, limit: number): Promise<number> {
  const rows = await db.selectFrom('import_lines').select('line').where('import_id', '=', importId).orderBy('line').limit(limit).execute()
  if (rows.length === 0) return 0
  await db.deleteFrom('import_lines').where('import_id', '=', importId).where('line', '<=', rows[rows.length - 1]!.line).execute()
  return rows.length
}

export async function deleteImport(db: Db, id: number): Promise<void> {
  await db.deleteFrom('import_errors').where('import_id', '=', id).execute()
  await db.deleteFrom('imports').where('id', '=', id).execute()
}

export function findImport(db: Db | Trx, id: number): Promise<ImportRow | undefined> {
  return db.selectFrom('imports').selectAll().where('id', '=', id).where('received', '=', 1).executeTakeFirst()
}

/** A page of received imports, newest first, before the id `before` (0: from the newest). */
export function listImports(db: Db, before: number, limit: number): Promise<ImportRow[]> {
  let q = db.selectFrom('imports').selectAll().where('received', '=', 1).orderBy('id', 'desc').limit(limit)
  if (before > 0) q = q.where('id', '<', before)
  return q.execute()
}

/** A page of an import's errors in line order, after the error `after` (0: from the first). */
export function listErrors(db: Db, importId: number, after: number, limit: number) {
  return db.selectFrom('import_errors').select(['id', 'line', 'code', 'detail', 'email', 'external_id'])
    .where('import_id', '=', importId).where('id', '>', after).orderBy('id').limit(limit).execute()
}

/** The oldest import waiting for an instance, or whose instance stopped renewing its lease. */
export function nextClaimable(db: Db, now: number): Promise<{ id: number } | undefined> {
  return db.selectFrom('imports').select('id').where('received', '=', 1).where('status', 'in', ['pending', 'running'])
    .where((eb) => eb.or([eb('lease', 'is', null), eb('lease_until', '<', now)])).orderBy('id').limit(1).executeTakeFirst()
}

/** Takes the import's lease if it is free; whether it was taken. */
export async function takeLease(db: Db, id: number, lease: string, now: number, until: number): Promise<boolean> {
  const result = await db.updateTable('imports')
    .set((eb) => ({ lease, lease_until: until, status: 'running', started_at: eb.fn.coalesce('started_at', eb.val(now)) }))
    .where('id', '=', id).where('status', 'in', ['pending', 'running'])
    .where((eb) => eb.or([eb('lease', 'is', null), eb('lease_until', '<', now)]))
    .executeTakeFirst()
  return Number(result.numUpdatedRows) === 1
}

/** The import, locked, if this lease still holds it: a batch goes on only then. */
export function holdLease(trx: Trx, id: number, lease: string): Promise<ImportRow | undefined> {
  let q = trx.selectFrom('imports').selectAll().where('id', '=', id).where('lease', '=', lease)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

export interface Counts { created: number; updated: number; skipped: number; failed: number }

/** A batch done: its lines counted, the lease renewed. */
export async function advance(trx: Trx, id: number, processed: number, counts: Counts, until: number): Promise<void> {
  await trx.updateTable('imports').set((eb) => ({
    processed,
    created: eb('created', '+', counts.created),
    updated: eb('updated', '+', counts.updated),
    skipped: eb('skipped', '+', counts.skipped),
    failed: eb('failed', '+', counts.failed),
    lease_until: until
  })).where('id', '=', id).execute()
}

export async function finishImport(db: Db, id: number, lease: string, now: number): Promise<void> {
  await db.updateTable('imports').set({ status: 'succeeded', finished_at: now, lease: null, lease_until: null })
    .where('id', '=', id).where('lease', '=', lease).execute()
}

export async function releaseLease(db: Db, id: number, lease: string): Promise<void> {
  await db.updateTable('imports').set({ lease: null, lease_until: null }).where('id', '=', id).where('lease', '=', lease).execute()
}

/** The staged lines after `after`, in order. */
export function linesAfter(trx: Trx, importId: number, after: number, limit: number) {
  return trx.selectFrom('import_lines').select(['line', 'body']).where('import_id', '=', importId).where('line', '>', after)
    .orderBy('line').limit(limit).execute()
}

export async function insertErrors(trx: Trx, importId: number, errors: Array<Omit<ImportErrorRow, 'id'>>): Promise<void> {
  if (errors.length) await trx.insertInto('import_errors').values(errors.map((e) => ({ import_id: importId, ...e }))).execute()
}

/** Imports whose upload never finished (the instance receiving it stopped), older than `before`. */
export function abandonedImports(db: Db, before: number) {
  return db.selectFrom('imports').select('id').where('received', '=', 0).where('created_at', '<', before).limit(10).execute()
}

/** Finished imports whose staged lines are still there. */
export function finishedWithLines(db: Db) {
  return db.selectFrom('imports').select('id').where('status', 'in', ['succeeded', 'failed'])
    .where((eb) => eb.exists(eb.selectFrom('import_lines').select('line').whereRef('import_lines.import_id', '=', 'imports.id')))
    .limit(10).execute()
}

/** The users a line names, by its external id and its addresses (locked): none, one, or a conflict. */
export async function usersNamed(trx: Trx, externalId: string | null, addresses: string[]): Promise<Array<{ id: number; external_id: string | null; by: 'external_id' | 'address' }>> {
  const found: Array<{ id: number; external_id: string | null; by: 'external_id' | 'address' }> = []
  if (externalId !== null) {
    let q = trx.selectFrom('users').select(['id', 'external_id']).where('external_id', '=', externalId)
    if (locksRows(trx)) q = q.forUpdate()
    const row = await q.executeTakeFirst()
    if (row) found.push({ ...row, by: 'external_id' })
  }
  if (addresses.length) {
    let q = trx.selectFrom('emails').innerJoin('users', 'users.id', 'emails.user_id').select(['users.id', 'users.external_id'])
      .where('emails.address_norm', 'in', addresses.map(foldedKey))
    if (locksRows(trx)) q = q.forUpdate()
    for (const row of await q.execute()) found.push({ ...row, by: 'address' })
  }
  return found
}

/** The addresses of a user, as the account functions read them. */
export function addressesOf(trx: Trx, userId: number) {
  return trx.selectFrom('emails').select(EMAIL_COLUMNS).where('user_id', '=', userId).orderBy('id').execute()
}

export async function readPasswordHash(trx: Trx, userId: number): Promise<string | undefined> {
  const row = await trx.selectFrom('users').select('password_hash').where('id', '=', userId).executeTakeFirst()
  return row?.password_hash
}

/**
 * Which of these external ids and folded addresses are taken here (`x:` and `a:` keys): by a user, or held by a
 * revert still live. The rows found are locked on MySQL, as usersNamed locks them; a key free now may be taken before
 * the batch commits, and its insert then fails as a unique violation, which sends the batch a line at a time.
 */
export async function keysTaken(trx: Trx, externalIds: string[], addressNorms: string[], now: number): Promise<Set<string>> {
  const taken = new Set<string>()
  if (externalIds.length) {
    let q = trx.selectFrom('users').select('external_id').where('external_id', 'in', externalIds)
    if (locksRows(trx)) q = q.forUpdate()
    for (const row of await q.execute()) taken.add(`x:${row.external_id}`)
  }
  if (addressNorms.length) {
    let q = trx.selectFrom('emails').select('address_norm').where('address_norm', 'in', addressNorms)
    if (locksRows(trx)) q = q.forUpdate()
    for (const row of await q.execute()) taken.add(`a:${row.address_norm}`)
    let held = trx.selectFrom('email_reverts').select('address_norm').where('address_norm', 'in', addressNorms).where('expires_at', '>', now)
    if (locksRows(trx)) held = held.forUpdate()
    for (const row of await held.execute()) taken.add(`a:${row.address_norm}`)
  }
  return taken
}

/** Address rows of new users, a thousand a statement (SQLite takes at most 32,766 parameters in one). */
export async function insertEmailRows(trx: Trx, rows: Array<Insertable<EmailsTable>>): Promise<void> {
  for (let i = 0; i < rows.length; i += 1000) await trx.insertInto('emails').values(rows.slice(i, i + 1000)).execute()
}

/** Whether a MySQL server takes INSERT … RETURNING (MariaDB does; MySQL does not), learnt at its first try: by dialect adapter, one a database. */
const returning = new WeakMap<object, boolean>()

/**
 * New users' rows in one statement; their ids, in order. SQLite has one writer at a time, and this transaction is
 * it: the ids are given here, after the highest ever handed out. MariaDB answers them (RETURNING). Elsewhere (MySQL,
 * which has no RETURNING), a row at a time.
 */
export async function insertUserRows(trx: Trx, rows: Array<Insertable<UsersTable>>): Promise<number[]> {
  if (rows.length === 0) return []
  if (!locksRows(trx)) {
    const { last } = await trx.selectFrom('users').select((eb) => eb.fn.max('id').as('last')).executeTakeFirstOrThrow()
    const seq = await sql<{ seq: number }>`select seq from sqlite_sequence where name = 'users'`.execute(trx)
    const first = Math.max(Number(last ?? 0), Number(seq.rows[0]?.seq ?? 0)) + 1
    const ids = rows.map((_, i) => first + i)
    await trx.insertInto('users').values(rows.map((row, i) => ({ ...row, id: ids[i] }))).execute()
    return tallied(trx, ids)
  }
  const adapter = trx.getExecutor().adapter
  if (returning.get(adapter) !== false) {
    try {
      // Kysely's MySQL dialect writes no RETURNING clause: it goes after the statement Kysely compiled.
      const insert = trx.insertInto('users').values(rows).compile()
      const inserted = await trx.executeQuery<{ id: number }>(CompiledQuery.raw(`${insert.sql} returning id`, [...insert.parameters]))
      if (inserted.rows.length !== rows.length) throw new Error(`RETURNING gave ${inserted.rows.length} ids for ${rows.length} users`)
      returning.set(adapter, true)
      // Auto-increment ids rise in the order of the VALUES: sorted, they pair with the rows whatever order RETURNING keeps.
      return tallied(trx, inserted.rows.map((r) => Number(r.id)).sort((a, b) => a - b))
    } catch (err) {
      if ((err as { errno?: number }).errno !== ER_PARSE_ERROR) throw err
      returning.set(adapter, false)
    }
  }
  const ids: number[] = []
  for (const row of rows) ids.push(Number((await trx.insertInto('users').values(row).executeTakeFirstOrThrow()).insertId))
  return tallied(trx, ids)
}

/** The new users' ids, once counted in the tally (in one slot: only the sum is read). */
async function tallied(trx: Trx, ids: number[]): Promise<number[]> {
  await tallyUsers(trx, ids[0]!, ids.length)
  return ids
}
const ER_PARSE_ERROR = 1064
