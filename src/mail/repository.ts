import type { Selectable } from 'kysely'
import type { MailOutboxTable } from '../../db/types.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'
import type { OutboxBacklog } from '../metrics/kinds.js'
import type { Mail } from './templates.js'

export type OutboxRow = Selectable<MailOutboxTable>

/** Puts a mail in the outbox, in the transaction of the change that causes it: it is sent if, and only if, that commits. */
export async function enqueueMail(trx: Trx, mail: Mail, now: number): Promise<void> {
  await trx.insertInto('mail_outbox').values({
    kind: mail.kind, recipient: mail.to, data: JSON.stringify(mail.data), state: 'pending', attempts: 0,
    created_at: now, next_attempt_at: now, claim: null, sent_at: null, last_error: null
  }).execute()
}

/**
 * Takes up to `limit` due mails for one delivery run (`claim`): each is leased until `leaseUntil`, when another run
 * may take it if this one has not marked it. On MySQL/MariaDB the due rows are locked with SKIP LOCKED, so
 * instances claiming at once take different mails and none waits for another; SQLite has one writer at a time.
 */
export async function claimDue(trx: Trx, now: number, limit: number, claim: string, leaseUntil: number): Promise<OutboxRow[]> {
  let due = trx.selectFrom('mail_outbox').select('id')
    .where('state', '=', 'pending').where('next_attempt_at', '<=', now)
    .orderBy('next_attempt_at').orderBy('id').limit(limit)
  if (locksRows(trx)) due = due.forUpdate().skipLocked()
  const ids = (await due.execute()).map((r) => r.id)
  if (ids.length === 0) return []
  await trx.updateTable('mail_outbox').set({ claim, next_attempt_at: leaseUntil }).where('id', 'in', ids).execute()
  return trx.selectFrom('mail_outbox').selectAll().where('id', 'in', ids).orderBy('id').execute()
}

/** Delivered: its values (tokens) are dropped. False when the run had lost its lease, so another may send it too. */
export async function markSent(db: Db, id: number, claim: string, now: number): Promise<boolean> {
  const result = await db.updateTable('mail_outbox')
    .set({ state: 'sent', sent_at: now, data: '{}', claim: null })
    .where('id', '=', id).where('claim', '=', claim).executeTakeFirst()
  return Number(result.numUpdatedRows) > 0
}

/** Gives back mails a run claimed but did not reach (the deliverer stopped): due again at once, for anyone. */
export async function releaseClaims(db: Db, ids: number[], claim: string, now: number): Promise<void> {
  if (ids.length === 0) return
  await db.updateTable('mail_outbox').set({ claim: null, next_attempt_at: now })
    .where('id', 'in', ids).where('claim', '=', claim).where('state', '=', 'pending').execute()
}

/** A temporary failure: tried again at `nextAttemptAt`. */
export async function markRetry(db: Db, id: number, claim: string, attempts: number, nextAttemptAt: number, error: string): Promise<void> {
  await db.updateTable('mail_outbox')
    .set({ attempts, next_attempt_at: nextAttemptAt, last_error: error, claim: null })
    .where('id', '=', id).where('claim', '=', claim).execute()
}

/** Given up: permanent refusal, or temporary failures for too long. Its values (tokens) are dropped. */
export async function markFailed(db: Db, id: number, claim: string, attempts: number, error: string): Promise<void> {
  await db.updateTable('mail_outbox')
    .set({ state: 'failed', attempts, data: '{}', last_error: error, claim: null })
    .where('id', '=', id).where('claim', '=', claim).execute()
}

/** The mail waiting to be sent: how many, and the age of the oldest (the metrics read it when scraped). */
export async function backlog(db: Db, now: number): Promise<OutboxBacklog> {
  const row = await db.selectFrom('mail_outbox').where('state', '=', 'pending')
    .select((eb) => [eb.fn.countAll<number | string>().as('pending'), eb.fn.min('created_at').as('oldest')]).executeTakeFirst()
  const oldest = row?.oldest === null || row?.oldest === undefined ? now : Number(row.oldest)
  return { pending: Number(row?.pending ?? 0), oldestAgeSeconds: Math.max(0, (now - oldest) / 1000) }
}

/** Drops sent and given-up mail created before `before`. */
export async function purgeFinished(db: Db, before: number): Promise<void> {
  await db.deleteFrom('mail_outbox').where('state', 'in', ['sent', 'failed']).where('created_at', '<', before).execute()
}
