import type { Insertable, Selectable, Updateable } from 'kysely'
import type { WebhooksTable } from '../../db/types.js'
import type { DeliveryStatus } from '../../schemas/webhook.js'
import type { Db, Trx } from '../database/index.js'
import { locksRows } from '../database/transaction.js'

export type WebhookRow = Selectable<WebhooksTable>

/** A webhook delivery as the API lists it: the outbox's row, seen through its webhook. */
export interface DeliveryRow {
  id: number
  webhook_id: number | null
  event_id: string | null
  template: string
  state: 'pending' | 'sent' | 'failed'
  attempts: number
  last_attempt_at: number | null
  last_status_code: number | null
  last_error: string | null
  next_attempt_at: number
  claim: string | null
}

const DELIVERY_COLUMNS = [
  'id', 'webhook_id', 'event_id', 'template', 'state', 'attempts', 'last_attempt_at', 'last_status_code', 'last_error', 'next_attempt_at', 'claim'
] as const

const STATE_OF: Record<DeliveryStatus, DeliveryRow['state']> = { pending: 'pending', delivered: 'sent', failed: 'failed' }

export async function insertWebhook(db: Db | Trx, values: Insertable<WebhooksTable>): Promise<number> {
  const result = await db.insertInto('webhooks').values(values).executeTakeFirstOrThrow()
  return Number(result.insertId)
}

export function findWebhook(db: Db | Trx, id: number): Promise<WebhookRow | undefined> {
  return db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst()
}

export function listWebhooks(db: Db, afterId: number, limit: number): Promise<WebhookRow[]> {
  return db.selectFrom('webhooks').selectAll().where('id', '>', afterId).orderBy('id').limit(limit + 1).execute()
}

/** Changes a webhook; whether there was one. */
export async function updateWebhook(db: Db | Trx, id: number, changes: Updateable<WebhooksTable>): Promise<boolean> {
  const result = await db.updateTable('webhooks').set(changes).where('id', '=', id).executeTakeFirst()
  return result.numUpdatedRows > 0n
}

/**
 * Locks a webhook's row for the rest of the transaction (MySQL; SQLite's writers take turns by themselves): its
 * changes and its secrets' rotations take it first, so that they follow one another. The webhook, if there is one.
 */
export function lockWebhook(trx: Trx, id: number): Promise<WebhookRow | undefined> {
  let q = trx.selectFrom('webhooks').selectAll().where('id', '=', id)
  if (locksRows(trx)) q = q.forUpdate()
  return q.executeTakeFirst()
}

/** Adds a webhook's current secret, beside any others it has. */
export async function insertSecret(db: Db | Trx, webhookId: number, secret: string, now: number): Promise<void> {
  await db.insertInto('webhook_secrets').values({ webhook_id: webhookId, secret, created_at: now, expires_at: null }).execute()
}

/** Gives a webhook's current secrets (one, unless rows were written by hand) their end: they are current no more. */
export async function retireSecrets(trx: Trx, webhookId: number, expiresAt: number): Promise<void> {
  await trx.updateTable('webhook_secrets').set({ expires_at: expiresAt }).where('webhook_id', '=', webhookId).where('expires_at', 'is', null).execute()
}

/** The secrets that sign a webhook's deliveries at `now`: the current one first, then the newest former ones. */
export async function liveSecrets(db: Db, webhookId: number, now: number): Promise<string[]> {
  const rows = await db.selectFrom('webhook_secrets').select('secret').where('webhook_id', '=', webhookId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .orderBy('id', 'desc').execute()
  return rows.map((r) => r.secret)
}

/** Deletes the secrets whose overlap has ended: they sign nothing more, and a secret not kept cannot leak. */
export async function purgeExpiredSecrets(db: Db, now: number): Promise<void> {
  await db.deleteFrom('webhook_secrets').where('expires_at', '<=', now).execute()
}

/**
 * Deletes a webhook and every delivery to it, waiting or done: nothing more is sent to it. Its secrets go with its
 * row (the foreign key), locked after it as a rotation locks them. Whether there was one.
 */
export async function deleteWebhook(trx: Trx, id: number): Promise<boolean> {
  await trx.deleteFrom('outbox').where('kind', '=', 'webhook').where('webhook_id', '=', id).execute()
  const result = await trx.deleteFrom('webhooks').where('id', '=', id).executeTakeFirst()
  return result.numDeletedRows > 0n
}

/** A webhook's deliveries, newest first, before the delivery `beforeId` (0: from the newest), one more than `limit`. */
export function listDeliveries(db: Db, webhookId: number, status: DeliveryStatus | undefined, beforeId: number, limit: number): Promise<DeliveryRow[]> {
  let q = db.selectFrom('outbox').select(DELIVERY_COLUMNS).where('kind', '=', 'webhook').where('webhook_id', '=', webhookId)
  if (status) q = q.where('state', '=', STATE_OF[status])
  if (beforeId > 0) q = q.where('id', '<', beforeId)
  return q.orderBy('id', 'desc').limit(limit + 1).execute()
}

/**
 * Makes a delivery due now, with its give-up age counted from now: pending again whatever it was (a failed one is
 * tried anew). A run holding it loses its claim, so what that run learns is not recorded. Whether there was one.
 */
export async function retryDelivery(db: Db, webhookId: number, deliveryId: number, now: number): Promise<boolean> {
  const result = await db.updateTable('outbox')
    .set({ state: 'pending', next_attempt_at: now, created_at: now, claim: null, sent_at: null })
    .where('id', '=', deliveryId).where('kind', '=', 'webhook').where('webhook_id', '=', webhookId).executeTakeFirst()
  return result.numUpdatedRows > 0n
}

export function findDelivery(db: Db, webhookId: number, deliveryId: number): Promise<DeliveryRow | undefined> {
  return db.selectFrom('outbox').select(DELIVERY_COLUMNS)
    .where('id', '=', deliveryId).where('kind', '=', 'webhook').where('webhook_id', '=', webhookId).executeTakeFirst()
}

/** The enabled webhooks and what they subscribe to, read in the transaction that places events (fanout.ts). */
export async function subscribers(trx: Trx): Promise<Array<Pick<WebhookRow, 'id' | 'events'>>> {
  return trx.selectFrom('webhooks').select(['id', 'events']).where('enabled', '=', 1).execute()
}

/** Enabled webhooks with deliveries due now that no run holds: up to `limit`, longest waiting first. */
export async function dueWebhooks(db: Db, now: number, limit: number): Promise<number[]> {
  const rows = await db.selectFrom('outbox').innerJoin('webhooks', 'webhooks.id', 'outbox.webhook_id')
    .select('outbox.webhook_id')
    .where('outbox.kind', '=', 'webhook').where('outbox.state', '=', 'pending').where('outbox.next_attempt_at', '<=', now)
    .where('webhooks.enabled', '=', 1)
    .where((eb) => eb.or([eb('webhooks.lease_until', 'is', null), eb('webhooks.lease_until', '<=', now)]))
    .groupBy('outbox.webhook_id').orderBy((eb) => eb.fn.min('outbox.next_attempt_at')).limit(limit).execute()
  return rows.map((r) => r.webhook_id).filter((id): id is number => id !== null)
}

/**
 * Takes a webhook for one delivery run until `until`, if no other run holds it: one request in flight per webhook,
 * across instances. Whether it was taken.
 */
export async function leaseWebhook(db: Db, id: number, lease: string, now: number, until: number): Promise<boolean> {
  const result = await db.updateTable('webhooks').set({ lease, lease_until: until })
    .where('id', '=', id).where('enabled', '=', 1)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)]))
    .executeTakeFirst()
  return result.numUpdatedRows > 0n
}

export async function releaseWebhook(db: Db, id: number, lease: string): Promise<void> {
  await db.updateTable('webhooks').set({ lease: null, lease_until: null }).where('id', '=', id).where('lease', '=', lease).execute()
}

/** A delivery went through: the webhook is failing no more. */
export async function noteSuccess(db: Db, id: number): Promise<void> {
  await db.updateTable('webhooks').set({ failing_since: null }).where('id', '=', id).where('failing_since', 'is not', null).execute()
}

/**
 * A delivery failed: the webhook is failing since then, if it was not already. One failing for `disableAfterMs` is
 * disabled, with `reason`; whether this disabled it.
 */
export async function noteFailure(db: Db, id: number, at: number, disableAfterMs: number, reason: string): Promise<boolean> {
  await db.updateTable('webhooks').set({ failing_since: at }).where('id', '=', id).where('failing_since', 'is', null).execute()
  const result = await db.updateTable('webhooks').set({ enabled: 0, disabled_reason: reason })
    .where('id', '=', id).where('enabled', '=', 1).where('failing_since', '<=', at - disableAfterMs).executeTakeFirst()
  return result.numUpdatedRows > 0n
}
