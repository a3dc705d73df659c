import type { Insertable, Selectable } from 'kysely'
import type { OutboxKind, OutboxTable } from '../../db/types.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'
import type { OutboxBacklog } from '../metrics/kinds.js'

export type OutboxRow = Selectable<OutboxTable>

/** What a kind writes: the rest (state, attempts, times, claim) is the outbox's own. */
export type NewMessage = Pick<Insertable<OutboxTable>, 'kind' | 'template' | 'recipient' | 'data' | 'webhook_id' | 'event_id'>

/** Puts messages in the outbox, in the transaction of the change that causes them: sent if, and only if, it commits. */
export async function enqueue(trx: Trx, messages: NewMessage[], now: number): Promise<void> {
  if (messages.length === 0) return
  await trx.insertInto('outbox').values(messages.map((m) => ({
    webhook_id: null, event_id: null, ...m,
    state: 'pending' as const, attempts: 0, created_at: now, next_attempt_at: now, claim: null, sent_at: null, last_error: null,
    last_attempt_at: null, last_status_code: null
  }))).execute()
}

/**
 * Takes due messages by id for one delivery run (`claim`): each is leased until `leaseUntil`, when another run may
 * take it if this one has not marked it. The rows as claimed, in id order.
 */
export async function claimRows(trx: Trx, ids: number[], claim: string, leaseUntil: number): Promise<OutboxRow[]> {
  if (ids.length === 0) return []
  await trx.updateTable('outbox').set({ claim, next_attempt_at: leaseUntil }).where('id', 'in', ids).execute()
  return trx.selectFrom('outbox').selectAll().where('id', 'in', ids).orderBy('id').execute()
}

/**
 * Up to `limit` due messages of a kind, oldest due first. On MySQL/MariaDB they are locked with SKIP LOCKED, so
 * instances claiming at once take different messages and none waits for another; SQLite has one writer at a time.
 */
export async function dueIds(trx: Trx, kind: OutboxKind, now: number, limit: number, webhookId?: number): Promise<number[]> {
  let due = trx.selectFrom('outbox').select('id').where('kind', '=', kind).where('state', '=', 'pending').where('next_attempt_at', '<=', now)
  if (webhookId !== undefined) due = due.where('webhook_id', '=', webhookId)
  due = due.orderBy(webhookId === undefined ? 'next_attempt_at' : 'id').orderBy('id').limit(limit)
  if (locksRows(trx)) due = due.forUpdate().skipLocked()
  return (await due.execute()).map((r) => r.id)
}

/** How an attempt ended, as the outbox records it. */
export interface Outcome {
  attempts: number
  at: number
  /** The receiver's status code (webhooks), or null. */
  statusCode: number | null
}

/**
 * Delivered. `dropData`: its values (a mail's tokens) go with it. False when the run had lost its lease, so another
 * may send it too.
 */
export async function markSent(db: Db, id: number, claim: string, outcome: Outcome, dropData: boolean): Promise<boolean> {
  const result = await db.updateTable('outbox')
    .set({
      state: 'sent', sent_at: outcome.at, claim: null, attempts: outcome.attempts, last_attempt_at: outcome.at,
      last_status_code: outcome.statusCode, last_error: null, ...(dropData ? { data: '{}' } : {})
    })
    .where('id', '=', id).where('claim', '=', claim).executeTakeFirst()
  return Number(result.numUpdatedRows) > 0
}

/** A temporary failure: tried again at `nextAttemptAt`. */
export async function markRetry(db: Db, id: number, claim: string, outcome: Outcome, nextAttemptAt: number, error: string): Promise<void> {
  await db.updateTable('outbox')
    .set({
      attempts: outcome.attempts, next_attempt_at: nextAttemptAt, last_error: error, claim: null,
      last_attempt_at: outcome.at, last_status_code: outcome.statusCode
    })
    .where('id', '=', id).where('claim', '=', claim).execute()
}

/** Given up: a permanent refusal, or temporary failures for too long. `dropData` as for markSent. */
export async function markFailed(db: Db, id: number, claim: string, outcome: Outcome, error: string, dropData: boolean): Promise<void> {
  await db.updateTable('outbox')
    .set({
      state: 'failed', attempts: outcome.attempts, last_error: error, claim: null,
      last_attempt_at: outcome.at, last_status_code: outcome.statusCode, ...(dropData ? { data: '{}' } : {})
    })
    .where('id', '=', id).where('claim', '=', claim).execute()
}

/** Gives back messages a run claimed but did not reach (the deliverer stopped): due again at once, for anyone. */
export async function releaseClaims(db: Db, ids: number[], claim: string, now: number): Promise<void> {
  if (ids.length === 0) return
  await db.updateTable('outbox').set({ claim: null, next_attempt_at: now })
    .where('id', 'in', ids).where('claim', '=', claim).where('state', '=', 'pending').execute()
}

/** The messages of a kind waiting to be sent: how many, and the age of the oldest (the metrics read it when scraped). */
export async function backlog(db: Db, kind: OutboxKind, now: number): Promise<OutboxBacklog> {
  const row = await db.selectFrom('outbox').where('kind', '=', kind).where('state', '=', 'pending')
    .select((eb) => [eb.fn.countAll<number | string>().as('pending'), eb.fn.min('created_at').as('oldest')]).executeTakeFirst()
  const oldest = row?.oldest === null || row?.oldest === undefined ? now : Number(row.oldest)
  return { pending: Number(row?.pending ?? 0), oldestAgeSeconds: Math.max(0, (now - oldest) / 1000) }
}

/** Drops sent and given-up messages created before `before`, a batch per statement. */
export async function purgeFinished(db: Db, before: number, batch = 1000): Promise<void> {
  for (;;) {
    const ids = (await db.selectFrom('outbox').select('id').where('created_at', '<', before).where('state', 'in', ['sent', 'failed'])
      .orderBy('created_at').limit(batch).execute()).map((r) => r.id)
    if (ids.length > 0) await db.deleteFrom('outbox').where('id', 'in', ids).execute()
    if (ids.length < batch) return
  }
}
