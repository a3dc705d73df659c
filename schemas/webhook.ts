import { Type, type Static } from '@sinclair/typebox'
import { Cursor, Href, Id, Limit, Timestamp } from './common.js'
import { ref, stringEnum } from './ref.js'

/** A type (`user.created`) or a family of them (`user.*`). */
const EventPattern = Type.String({ pattern: '^[a-z]+\\.([a-z_]+|\\*)$', maxLength: 40, description: 'An event type (email.verified) or a family (user.*)' })

const Url = Type.String({ minLength: 8, maxLength: 2048, description: 'https:// (http:// only with WEBHOOK_ALLOW_HTTP); its host must be a public address unless WEBHOOK_ALLOW_PRIVATE_NETWORKS', examples: ['https://hooks.example.com/roster'] })
const Events = Type.Array(EventPattern, { minItems: 1, maxItems: 30, uniqueItems: true, description: 'The event types and families it receives', examples: [['user.*', 'email.verified']] })
const Description = Type.String({ maxLength: 500, description: 'What it is for, for the admins' })

export const Webhook = Type.Object(
  {
    id: Id,
    href: Href,
    url: Type.String(),
    events: Type.Array(Type.String()),
    enabled: Type.Boolean({ description: 'false: nothing is sent to it; set it true again with PUT' }),
    description: Type.String(),
    created_at: Timestamp,
    disabled_reason: Type.Union([Type.String(), Type.Null()], { description: 'Why the service disabled it (its deliveries failed for WEBHOOK_DISABLE_AFTER_SECONDS); null while enabled' })
  },
  { $id: 'Webhook', description: 'An endpoint events are POSTed to, signed as Standard Webhooks says' }
)
export type Webhook = Static<typeof Webhook>

export const WebhookWithSecret = Type.Object({
  ...Webhook.properties,
  secret: Type.String({ description: 'whsec_…: shown this once; verify deliveries with it (a Standard Webhooks library)' })
}, { $id: 'WebhookWithSecret', description: 'A new webhook, with its signing secret' })

export const NewWebhook = Type.Object(
  { url: Url, events: Events, enabled: Type.Optional(Type.Boolean({ default: true })), description: Type.Optional(Description) },
  { $id: 'NewWebhook', additionalProperties: false, description: 'A webhook to create: where events go, and which' }
)
export type NewWebhook = Static<typeof NewWebhook>

export const WebhookReplacement = Type.Object(
  { url: Url, events: Events, enabled: Type.Boolean(), description: Type.Optional(Description) },
  { $id: 'WebhookReplacement', additionalProperties: false, description: 'The whole webhook: what is not given takes its default (no description)' }
)
export type WebhookReplacement = Static<typeof WebhookReplacement>

export const WebhookSecret = Type.Object(
  { secret: Type.String({ description: 'whsec_…: the new secret, shown this once; the former one keeps signing beside it for WEBHOOK_SECRET_OVERLAP_SECONDS' }) },
  { $id: 'WebhookSecret', description: 'A rotated signing secret' }
)

export const WebhookCollection = Type.Object(
  { href: Href, items: Type.Array(ref(Webhook)), next: Type.Union([Type.String(), Type.Null()]) },
  { $id: 'WebhookCollection', description: 'A page of webhooks' }
)

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const
export const DeliveryStatus = stringEnum(DELIVERY_STATUSES, { $id: 'DeliveryStatus', description: 'pending: not delivered yet (retried); delivered: answered 2xx; failed: given up' })
export type DeliveryStatus = Static<typeof DeliveryStatus>

export const Delivery = Type.Object(
  {
    id: Id,
    href: Href,
    event_id: Type.String({ description: 'The event, and the `webhook-id` header of every attempt' }),
    event_type: Type.String(),
    status: ref(DeliveryStatus),
    attempts: Type.Integer({ minimum: 0 }),
    last_attempt_at: Type.Union([Timestamp, Type.Null()]),
    last_status_code: Type.Union([Type.Integer(), Type.Null()], { description: 'The status of the receiver\'s last answer; null when it gave none (unreachable, timed out)' }),
    last_error: Type.Union([Type.String(), Type.Null()], { description: 'What went wrong at the last failed attempt' }),
    next_attempt_at: Type.Union([Timestamp, Type.Null()], { description: 'When it is tried next; null once delivered or failed' })
  },
  { $id: 'Delivery', description: 'One event sent (or to be sent) to one webhook' }
)
export type Delivery = Static<typeof Delivery>

export const DeliveryCollection = Type.Object(
  { href: Href, items: Type.Array(ref(Delivery)), next: Type.Union([Type.String(), Type.Null()]) },
  { $id: 'DeliveryCollection', description: 'A page of deliveries, newest first' }
)

export const WebhookParams = Type.Object({ webhook_id: Id }, { additionalProperties: false })
export const DeliveryParams = Type.Object({ webhook_id: Id, delivery_id: Id }, { additionalProperties: false })
export const DeliveryQuery = Type.Object({ status: Type.Optional(ref(DeliveryStatus)), limit: Limit, cursor: Cursor }, { additionalProperties: false })
