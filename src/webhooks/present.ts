import type { Delivery, Webhook } from '../../schemas/webhook.js'
import { isoTimestamp as iso } from '../common/timestamps.js'
import { patternsOf } from './fanout.js'
import type { DeliveryRow, WebhookRow } from './repository.js'

export const webhookPath = (id: number) => `/webhooks/${id}`

export function presentWebhook(row: WebhookRow, base: string): Webhook {
  return {
    id: row.id,
    href: base + webhookPath(row.id),
    url: row.url,
    events: patternsOf(row.events),
    enabled: row.enabled === 1,
    description: row.description,
    created_at: iso(row.created_at),
    disabled_reason: row.enabled === 1 ? null : row.disabled_reason
  }
}

const STATUS = { pending: 'pending', sent: 'delivered', failed: 'failed' } as const

export function presentDelivery(row: DeliveryRow, base: string): Delivery {
  const webhookId = row.webhook_id ?? 0
  return {
    id: row.id,
    href: `${base}${webhookPath(webhookId)}/deliveries/${row.id}`,
    event_id: row.event_id ?? '',
    event_type: row.template,
    status: STATUS[row.state],
    attempts: row.attempts,
    last_attempt_at: row.last_attempt_at === null ? null : iso(row.last_attempt_at),
    last_status_code: row.last_status_code,
    last_error: row.state === 'sent' ? null : row.last_error,
    next_attempt_at: row.state === 'pending' ? iso(row.next_attempt_at) : null
  }
}
