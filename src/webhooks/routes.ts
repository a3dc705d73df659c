import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { PageQuery } from '../../schemas/common.js'
import { ref } from '../../schemas/ref.js'
import {
  Delivery, DeliveryCollection, DeliveryParams, DeliveryQuery, NewWebhook, Webhook, WebhookCollection, WebhookParams, WebhookReplacement,
  WebhookSecret, WebhookWithSecret
} from '../../schemas/webhook.js'
import { withMultipart } from '../http/bodies.js'
import { contentTag, ifMatchAllows } from '../http/etag.js'
import { FORM_TYPES, IdempotencyKey, IfMatch, NoContent, pageUnder, problems } from '../http/responses.js'
import { presentDelivery, presentWebhook } from './present.js'
import type { WebhookRow } from './repository.js'

const tags = ['webhooks']

/** Webhooks: endpoints events are pushed to, and what was sent to them. Admins only. */
const webhooks: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.webhooks

  app.get('/webhooks', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'listWebhooks', tags, summary: 'List webhooks', querystring: PageQuery,
      description: 'Every webhook, oldest first, without their secrets.',
      response: { 200: ref(WebhookCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401) }
    }
  }, async (request, reply) => pageUnder(reply, {
    base, path: '/webhooks', scope: 'webhooks', query: request.query, cursors: app.cursors,
    fetch: (after, limit) => service.list(after, limit),
    present: (row) => presentWebhook(row, base)
  }))

  app.get('/webhooks/:webhook_id', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'getWebhook', tags, summary: 'Read a webhook', description: 'Its secret is never shown again after its creation or rotation.',
      params: WebhookParams, response: { 200: ref(Webhook), ...problems(400, 401, [404, 'WEBHOOK_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const shown = presentWebhook(await service.get(request.params.webhook_id), base)
    reply.header('etag', contentTag(shown))
    return shown
  })

  app.get('/webhooks/:webhook_id/deliveries', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'listWebhookDeliveries', tags, summary: 'What was sent to a webhook, newest first',
      description: 'Each event sent (or to be sent) to the webhook, with its attempts and the receiver\'s last answer; `status` filters. Kept 7 days after it was delivered or failed.',
      params: WebhookParams, querystring: DeliveryQuery,
      response: { 200: ref(DeliveryCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401, [404, 'WEBHOOK_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const id = request.params.webhook_id
    const status = request.query.status
    return pageUnder(reply, {
      base, path: `/webhooks/${id}/deliveries`, scope: `deliveries:${id}:${status ?? ''}`, query: request.query, cursors: app.cursors,
      params: status ? [['status', status]] : [],
      fetch: (before, limit) => service.deliveries(id, status, before, limit),
      present: (row) => presentDelivery(row, base)
    })
  })

  app.get('/webhooks/:webhook_id/deliveries/:delivery_id', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'getWebhookDelivery', tags, summary: 'Read one delivery', params: DeliveryParams,
      description: 'Its attempts, the receiver\'s last answer, and when it is tried next.',
      response: { 200: ref(Delivery), ...problems(400, 401, [404, 'WEBHOOK_NOT_FOUND', 'DELIVERY_NOT_FOUND']) }
    }
  }, async (request) => presentDelivery(await service.delivery(request.params.webhook_id, request.params.delivery_id), base))

  await app.register(withMultipart(webhookWrites))
}

/** The routes that change webhooks: in the scope of the routes that may carry a body. */
const webhookWrites: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.webhooks
  const urlProblems = [400, 'VALIDATION_FAILED', 'INVALID_WEBHOOK_URL'] as [400, 'VALIDATION_FAILED', 'INVALID_WEBHOOK_URL']
  /** If-Match against a webhook as it stands: a webhook has no version, its tag is a digest of what GET shows. */
  const allowedBy = (header: string | undefined) => (current: WebhookRow) => ifMatchAllows(header, contentTag(presentWebhook(current, base)))

  app.post('/webhooks', {
    config: { auth: 'admin', idempotent: true },
    schema: {
      operationId: 'createWebhook', tags, consumes: FORM_TYPES, summary: 'Push events to an endpoint',
      description: 'Each event of a type in `events` is POSTed to `url` as JSON, signed as the Standard Webhooks specification says with the `secret` answered here (shown this once). 400 INVALID_WEBHOOK_URL for a URL that is not https:// (http:// only with WEBHOOK_ALLOW_HTTP) or whose host is or resolves to a non-public address (unless WEBHOOK_ALLOW_PRIVATE_NETWORKS); 400 VALIDATION_FAILED for an unknown event type.',
      headers: IdempotencyKey, body: ref(NewWebhook),
      response: { 201: ref(WebhookWithSecret), ...problems(urlProblems, 401, [409, 'IDEMPOTENCY_KEY_IN_USE'], 413, 415, 422) }
    }
  }, async (request, reply) => {
    const { row, secret } = await service.create(request.body)
    const webhook = presentWebhook(row, base)
    return reply.code(201).header('location', webhook.href).header('cache-control', 'no-store').send({ ...webhook, secret })
  })

  app.put('/webhooks/:webhook_id', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'replaceWebhook', tags, consumes: FORM_TYPES, summary: 'Change a webhook, or enable it again',
      description: 'The URL is checked as at creation. `enabled: true` on a disabled webhook enables it again: its waiting deliveries go, and new events are sent to it.',
      params: WebhookParams, headers: IfMatch, body: ref(WebhookReplacement),
      response: { 200: ref(Webhook), ...problems(urlProblems, 401, [404, 'WEBHOOK_NOT_FOUND'], 412, 413, 415) }
    }
  }, async (request, reply) => {
    const shown = presentWebhook(await service.replace(request.params.webhook_id, request.body, allowedBy(request.headers['if-match'])), base)
    reply.header('etag', contentTag(shown))
    return shown
  })

  app.delete('/webhooks/:webhook_id', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'deleteWebhook', tags, summary: 'Delete a webhook', params: WebhookParams, headers: IfMatch,
      description: 'Nothing more is sent to it, not even what was waiting; its deliveries are deleted with it.',
      response: { 204: NoContent, ...problems(400, 401, [404, 'WEBHOOK_NOT_FOUND'], 412) }
    }
  }, async (request, reply) => {
    await service.remove(request.params.webhook_id, allowedBy(request.headers['if-match']))
    return reply.code(204).send(null)
  })

  app.post('/webhooks/:webhook_id/secret', {
    config: { auth: 'admin', idempotent: true },
    schema: {
      operationId: 'rotateWebhookSecret', tags, summary: 'Rotate a webhook\'s signing secret',
      description: 'A new secret, shown this once. The secret it replaces keeps signing beside it for WEBHOOK_SECRET_OVERLAP_SECONDS from this rotation, so the receiver can switch without refusing a delivery; every secret a rotation answered keeps its own overlap, however many rotations follow it or run beside it.',
      params: WebhookParams, headers: IdempotencyKey,
      response: { 201: ref(WebhookSecret), ...problems(400, 401, [404, 'WEBHOOK_NOT_FOUND'], [409, 'IDEMPOTENCY_KEY_IN_USE'], 422) }
    }
  }, async (request, reply) => {
    const secret = await service.rotateSecret(request.params.webhook_id)
    return reply.code(201).header('cache-control', 'no-store').send({ secret })
  })

  app.post('/webhooks/:webhook_id/deliveries/:delivery_id/retry', {
    config: { auth: 'admin', idempotent: true },
    schema: {
      operationId: 'retryWebhookDelivery', tags, summary: 'Send a delivery again now',
      description: 'Pending, delivered or failed: it is sent again at once, and retried as a new delivery would be if it fails.',
      params: DeliveryParams, headers: IdempotencyKey,
      response: { 202: NoContent, ...problems(400, 401, [404, 'WEBHOOK_NOT_FOUND', 'DELIVERY_NOT_FOUND'], [409, 'IDEMPOTENCY_KEY_IN_USE'], 422) }
    }
  }, async (request, reply) => {
    await service.retry(request.params.webhook_id, request.params.delivery_id)
    return reply.code(202).send(null)
  })
}

export default webhooks
