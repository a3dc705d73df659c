import type { NewWebhook, WebhookReplacement, DeliveryStatus } from '../../schemas/webhook.js'
import { InvalidInput, NotFound, VersionConflict } from '../common/errors.js'
import type { Db } from '../database/index.js'
import { inTransaction } from '../database/transaction.js'
import { typesOf } from '../events/types.js'
import { checkUrl, hostOf, RefusedDestination, resolvePublic, type DestinationRules, type Resolver } from './destination.js'
import {
  deleteWebhook, findDelivery, findWebhook, insertSecret, insertWebhook, listDeliveries, listWebhooks, lockWebhook, retireSecrets,
  retryDelivery, updateWebhook, type DeliveryRow, type WebhookRow
} from './repository.js'
import { newSecret } from './signing.js'

export interface WebhooksOptions {
  rules: DestinationRules
  resolve: Resolver
  /** After a rotation, the secret it replaced keeps signing this long (WEBHOOK_SECRET_OVERLAP_SECONDS). */
  secretOverlapMs: number
  /** A retried delivery is due now: the outbox is told. */
  wake: () => void
}

const webhookNotFound = (id: number) => new NotFound('WEBHOOK_NOT_FOUND', `No webhook has id ${id}`)

/**
 * The rules about webhooks: where they may point (checked at creation and on every change, and again at each
 * delivery), what they subscribe to, their secrets and their deliveries. Route rules have made sure the caller is
 * an admin.
 */
export class WebhooksService {
  constructor(private readonly db: Db, private readonly options: WebhooksOptions) {}

  /** A URL a webhook may point to: INVALID_WEBHOOK_URL saying why not. */
  private async destination(raw: string): Promise<string> {
    try {
      const url = checkUrl(raw, this.options.rules)
      await resolvePublic(hostOf(url), this.options.rules, this.options.resolve)
      return url.href
    } catch (err) {
      if (!(err instanceof RefusedDestination)) throw err
      throw new InvalidInput(`The webhook URL ${err.message}`, [{ path: '/url', in: 'body', message: err.message }], 'INVALID_WEBHOOK_URL')
    }
  }

  /** The subscription as stored: unknown types refused (VALIDATION_FAILED), duplicates kept once. */
  private subscription(patterns: string[]): string {
    typesOf(patterns, { in: 'body', path: '/events', code: 'VALIDATION_FAILED' })
    return JSON.stringify([...new Set(patterns)])
  }

  async create(input: NewWebhook): Promise<{ row: WebhookRow; secret: string }> {
    const events = this.subscription(input.events)
    const url = await this.destination(input.url)
    const now = Date.now()
    const secret = newSecret()
    const id = await inTransaction(this.db, async (trx) => {
      const inserted = await insertWebhook(trx, {
        url, events, enabled: input.enabled === false ? 0 : 1, description: input.description ?? '',
        disabled_reason: null, failing_since: null, lease: null, lease_until: null, created_at: now, updated_at: now
      })
      await insertSecret(trx, inserted, secret, now)
      return inserted
    })
    return { row: await this.get(id), secret }
  }

  list(afterId: number, limit: number): Promise<WebhookRow[]> {
    return listWebhooks(this.db, afterId, limit)
  }

  async get(id: number): Promise<WebhookRow> {
    return (await findWebhook(this.db, id)) ?? Promise.reject(webhookNotFound(id))
  }

  /**
   * Replaces a webhook if `allows` it as it stands (If-Match; PRECONDITION_FAILED otherwise); enabling it again
   * clears why it was disabled, and its run of failures.
   */
  async replace(id: number, input: WebhookReplacement, allows: (current: WebhookRow) => boolean = () => true): Promise<WebhookRow> {
    const events = this.subscription(input.events)
    const url = await this.destination(input.url)
    const enabled = input.enabled ? 1 : 0
    const reenabled = input.enabled ? { disabled_reason: null, failing_since: null } : {}
    await inTransaction(this.db, async (trx) => {
      const current = await lockWebhook(trx, id)
      if (!current) throw webhookNotFound(id)
      if (!allows(current)) throw new VersionConflict()
      await updateWebhook(trx, id, { url, events, enabled, description: input.description ?? '', updated_at: Date.now(), ...reenabled })
    })
    if (input.enabled) this.options.wake()
    return this.get(id)
  }

  /** Deletes a webhook if `allows` it as it stands (If-Match; PRECONDITION_FAILED otherwise). */
  async remove(id: number, allows: (current: WebhookRow) => boolean = () => true): Promise<void> {
    await inTransaction(this.db, async (trx) => {
      const current = await lockWebhook(trx, id)
      if (!current) throw webhookNotFound(id)
      if (!allows(current)) throw new VersionConflict()
      await deleteWebhook(trx, id)
    })
  }

  /**
   * A new secret; the current one keeps signing beside it for the overlap from now, so receivers can switch without
   * a gap. Rotations of one webhook take its lock and follow one another: each answered secret is current until the
   * next one retires it, and then signs for its own overlap, however many rotations come after it or beside it.
   */
  async rotateSecret(id: number): Promise<string> {
    const secret = newSecret()
    await inTransaction(this.db, async (trx) => {
      if (!(await lockWebhook(trx, id))) throw webhookNotFound(id)
      const now = Date.now()
      await retireSecrets(trx, id, now + this.options.secretOverlapMs)
      await insertSecret(trx, id, secret, now)
      await updateWebhook(trx, id, { updated_at: now })
    })
    return secret
  }

  async deliveries(id: number, status: DeliveryStatus | undefined, beforeId: number, limit: number): Promise<DeliveryRow[]> {
    const rows = await listDeliveries(this.db, id, status, beforeId, limit)
    if (rows.length === 0) await this.get(id)
    return rows
  }

  async delivery(id: number, deliveryId: number): Promise<DeliveryRow> {
    const row = await findDelivery(this.db, id, deliveryId)
    if (row) return row
    await this.get(id)
    throw new NotFound('DELIVERY_NOT_FOUND', `Webhook ${id} has no delivery with id ${deliveryId}`)
  }

  /** Sends a delivery again now, whatever its state. */
  async retry(id: number, deliveryId: number): Promise<void> {
    if (!(await retryDelivery(this.db, id, deliveryId, Date.now()))) await this.delivery(id, deliveryId)
    this.options.wake()
  }
}
