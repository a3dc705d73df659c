import { randomBytes } from 'node:crypto'
import { deliveryBody } from '../accounts/erasure.js'
import type { Db } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { DeliveryFailure, type Kind, type Lane } from '../outbox/kind.js'
import { claimRows, dueIds, type OutboxRow } from '../outbox/repository.js'
import type { Poster, WebhookLog } from './poster.js'
import { dueWebhooks, findWebhook, leaseWebhook, liveSecrets, noteFailure, noteSuccess, releaseWebhook, type WebhookRow } from './repository.js'
import { signedHeaders } from './signing.js'

export interface WebhookDeliveryOptions {
  timeoutMs: number
  retryBaseMs: number
  retryMaxMs: number
  /** A delivery still failing this long after its event is given up. */
  maxAgeMs: number
  /** A webhook all of whose deliveries have failed this long is disabled. */
  disableAfterMs: number
}

/** Deliveries one run sends to a webhook, one after another, before it lets the webhook go. */
const LANE_SIZE = 20

/**
 * Webhook deliveries as a kind of the outbox. A run first leases the webhook itself (one instance, one request in
 * flight per webhook), then claims its due deliveries in feed order and sends them one after another; webhooks are
 * sent to side by side, so a slow receiver delays only itself. A failing delivery waits for its own retry while the
 * ones after it go. Each is signed with every live secret of the webhook as it is at send time.
 */
export class WebhookKind implements Kind<WebhookRow> {
  readonly name = 'webhook'
  readonly dropsData = false
  readonly retry

  constructor(private readonly db: Db, private readonly poster: Poster, private readonly options: WebhookDeliveryOptions, private readonly log: WebhookLog) {
    this.retry = { baseMs: options.retryBaseMs, maxMs: options.retryMaxMs, giveUpAfterMs: options.maxAgeMs }
  }

  async claim(db: Db, now: number, lanes: number): Promise<Lane<WebhookRow>[]> {
    const out: Lane<WebhookRow>[] = []
    // A lease outlasts a lane's every delivery timing out.
    const until = now + LANE_SIZE * (this.options.timeoutMs + 1000) + 30_000
    for (const id of await dueWebhooks(db, now, lanes)) {
      const lease = randomBytes(12).toString('base64url')
      if (!(await leaseWebhook(db, id, lease, now, until))) continue // another run took it
      const finish = () => releaseWebhook(db, id, lease)
      try {
        const webhook = await findWebhook(db, id)
        const rows = webhook
          ? await inTransaction(db, async (trx) => claimRows(trx, await dueIds(trx, 'webhook', now, LANE_SIZE, id), lease, until))
          : []
        if (!webhook || rows.length === 0) await finish()
        else out.push({ claim: lease, rows, context: webhook, finish })
      } catch (err) {
        // The lease just taken goes back (the claim's transaction rolled back with it); the lanes claimed already run.
        await finish().catch(() => undefined)
        if (out.length === 0) throw err
        this.log.warn({ err, webhook: id }, 'webhook: a claim failed; trying again at the next run')
        break
      }
    }
    return out
  }

  /** The webhook as it is now: a lane stops when it was deleted or disabled, and sends to its current URL and secrets. */
  async proceed(lane: Lane<WebhookRow>): Promise<boolean> {
    const webhook = await findWebhook(this.db, lane.context.id)
    if (!webhook || webhook.enabled !== 1) return false
    lane.context = webhook
    return true
  }

  async send(row: OutboxRow, lane: Lane<WebhookRow>): Promise<number> {
    const webhook = lane.context
    const now = Date.now()
    const secrets = await liveSecrets(this.db, webhook.id, now)
    // A webhook always has a current secret; none means it was deleted since the lane last looked.
    if (secrets.length === 0) throw new DeliveryFailure('the webhook has no secret', false)
    const body = await deliveryBody(this.db, row.event_id, row.data)
    return this.poster.post(new URL(webhook.url), body, signedHeaders(secrets, row.event_id ?? '', new Date(now), body))
  }

  async settled(_row: OutboxRow, lane: Lane<WebhookRow>, result: 'delivered' | 'retried' | 'failed', at: number): Promise<void> {
    const id = lane.context.id
    // The context was read just before this delivery: a webhook failing no more needs no write.
    if (result === 'delivered') return lane.context.failing_since === null ? undefined : noteSuccess(this.db, id)
    const seconds = Math.round(this.options.disableAfterMs / 1000)
    if (await noteFailure(this.db, id, at, this.options.disableAfterMs, `every delivery failed for ${seconds} s`)) {
      this.log.warn({ webhook: id }, `webhook: disabled: every delivery failed for ${seconds} s (WEBHOOK_DISABLE_AFTER_SECONDS); an admin re-enables it with PUT`)
    }
  }

  close(): void {
    this.poster.close()
  }
}
