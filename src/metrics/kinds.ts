// What features and resources report to the metrics (metrics.ts), as plain types and values: no module that reports
// imports the metrics library.

/** What a login ended as (`roster_logins_total`). */
export const LOGIN_RESULTS = ['success', 'invalid_credentials', 'banned', 'throttled'] as const
export type LoginResult = typeof LOGIN_RESULTS[number]
/** What a delivery attempt of the outbox ended as (`roster_outbox_deliveries_total`). */
export type DeliveryResult = 'delivered' | 'retried' | 'failed'
/** The kinds of message the outbox holds. */
export type { OutboxKind } from '../../db/types.js'

/** The outbox's waiting messages of one kind, read when the metrics are scraped. */
export interface OutboxBacklog {
  pending: number
  /** Seconds since the oldest waiting message was written; 0 when none waits. */
  oldestAgeSeconds: number
}

/** The database pool, read when the metrics are scraped (MySQL; the embedded engine has no pool). */
export interface PoolUse {
  size: number
  inUse: number
  /** Requests that have had to wait for a connection since the start. */
  waits: number
}
