import Fastify from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Config } from '../schemas/config.js'
import './types.js'
import database from './database/plugin.js'
import emailRoutes from './emails/routes.js'
import events from './events/plugin.js'
import feedRoutes from './feed/routes.js'
import healthRoutes from './health/routes.js'
import bodies from './http/bodies.js'
import clientAddress from './http/client-address.js'
import metrics from './metrics/plugin.js'
import cors from './http/cors.js'
import cursors from './http/cursor.js'
import errorHandler from './http/error-handler.js'
import headers from './http/headers.js'
import openapi from './http/openapi.js'
import { serverOptions } from './http/options.js'
import loadShedding from './http/pressure.js'
import unreadBodies from './http/unread-body.js'
import idempotency from './idempotency/plugin.js'
import limits from './limits/plugin.js'
import accessLog from './logging/access-log.js'
import type { LogSink } from './logging/destination.js'
import { logging } from './logging/logger.js'
import type { SequencerOptions } from './events/sequencer.js'
import type { MailOptions } from './mail/kind.js'
import type { DelivererOptions } from './outbox/deliverer.js'
import outbox from './outbox/plugin.js'
import mail from './mail/plugin.js'
import services from './services.js'
import tokenPurge, { type PurgeOptions } from './sessions/purge.js'
import sessionRoutes from './sessions/routes.js'
import steps from './steps.js'
import tracing from './tracing/plugin.js'
import banLift, { type BanLiftOptions } from './users/ban-lift.js'
import deletions, { type DeletionOptions } from './users/deletion.js'
import firstAdmin from './users/first-admin.js'
import exportRoutes from './exports/routes.js'
import importWorker, { type ImportWorkerOptions } from './imports/plugin.js'
import importRoutes from './imports/routes.js'
import scimRoutes from './scim/plugin.js'
import consoleRoutes from './console/routes.js'
import userRoutes from './users/routes.js'
import verificationRoutes from './verification/routes.js'
import webhookDelivery, { type WebhookPluginOptions } from './webhooks/plugin.js'
import webhookRoutes from './webhooks/routes.js'

export interface BuildOptions {
  /** Where logs go (stdout by default); tests capture them here. */
  logStream?: LogSink
  /** Timings of the outbox and its mail (polling, retries); tests shorten them. */
  mail?: Partial<DelivererOptions & MailOptions>
  /** Timings of the events' sequencer and purge; tests shorten them. */
  events?: Partial<SequencerOptions>
  /** How webhook hosts are resolved; tests give their own. */
  webhooks?: WebhookPluginOptions
  /** Timings of the purge of expired sessions and tokens; tests shorten them. */
  purge?: Partial<PurgeOptions>
  /** Timings of the imports' background work; tests shorten them. */
  imports?: Partial<ImportWorkerOptions>
  /** How often ended bans are lifted; tests shorten it. */
  bans?: Partial<BanLiftOptions>
  /** How often scheduled deletions are made final and deleted users' events erased; tests shorten it. */
  deletions?: Partial<DeletionOptions>
}

/**
 * Builds the Roster app (it does not listen): each concern a plugin that owns its resources and closes them with
 * the app, registered in the order requests and resources need them. A plugin names the plugins it depends on, so
 * most misordered lines fail at start; the routes come after `steps` and `bodies`, whose hooks they take.
 */
export async function buildApp(config: Config, options: BuildOptions = {}) {
  const log = logging(config.LOG_LEVEL, options.logStream)
  const app = Fastify({ ...serverOptions(config), logger: log.logger }).withTypeProvider<TypeBoxTypeProvider>()
  app.decorate('config', config)
  app.addHook('onClose', async () => log.close())

  // Every request, before routing: its trace (when on), connections that must close, headers, the access line and
  // metrics, the client, overload.
  await app.register(tracing)
  await app.register(unreadBodies)
  await app.register(headers)
  await app.register(accessLog)
  await app.register(metrics)
  await app.register(clientAddress)
  await app.register(loadShedding)
  // Resources, and the answers to what goes wrong.
  await app.register(database)
  await app.register(errorHandler)
  await app.register(cursors)
  await app.register(limits)
  await app.register(outbox, options.mail ?? {})
  await app.register(mail, options.mail ?? {})
  await app.register(events, options.events ?? {})
  await app.register(webhookDelivery, options.webhooks ?? {})
  await app.register(idempotency)
  await app.register(tokenPurge, options.purge ?? {})
  await app.register(importWorker, options.imports ?? {})
  await app.register(banLift, options.bans ?? {})
  await app.register(deletions, options.deletions ?? {})
  await app.register(services)
  // The route machinery, then the routes: every route gets its steps from `steps`.
  await app.register(cors)
  await app.register(steps)
  await app.register(bodies)
  await app.register(openapi)
  await app.register(healthRoutes)
  await app.register(sessionRoutes)
  await app.register(userRoutes)
  await app.register(emailRoutes)
  await app.register(verificationRoutes)
  await app.register(feedRoutes)
  await app.register(webhookRoutes)
  await app.register(importRoutes)
  await app.register(exportRoutes)
  await app.register(scimRoutes)
  await app.register(consoleRoutes)
  await app.register(firstAdmin)
  return app
}

export type App = Awaited<ReturnType<typeof buildApp>>
