import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Repeating } from '../common/repeating.js'
import { ImportsService } from './service.js'

export interface ImportWorkerOptions {
  /** How often an idle instance looks for an import to work on. */
  pollMs: number
  /** Lines applied in one transaction. */
  batch: number
  /** How long an import's lease holds unless a batch renews it: another instance takes over after it. */
  leaseMs: number
}

declare module 'fastify' {
  interface FastifyInstance {
    imports: ImportsService
  }
}

/** A record longer than this fails its line unread. */
const MAX_LINE_BYTES = 1024 * 1024
const CLEANUP_EVERY = 60
/** Lines a batch applies in one transaction, on either engine. */
const IMPORT_BATCH = 200

/**
 * Imports: the service that receives files, and the background work that applies them, owned here from the moment
 * the app is ready until it closes. Each instance works on one import at a time under a lease of its own; a close
 * stops between two batches and gives the lease back, and a killed instance's lease runs out for another to take.
 */
async function importWorker(app: FastifyInstance, options: Partial<ImportWorkerOptions>): Promise<void> {
  // A batch's objects live across its round trips and outlast young-generation collections: a larger batch moved
  // them to the old generation faster than full collections came, and the heap grew with the file.
  const { pollMs, batch, leaseMs } = { pollMs: 1000, batch: IMPORT_BATCH, leaseMs: app.config.IMPORT_LEASE_SECONDS * 1000, ...options }
  const config = app.config
  const service = new ImportsService(app.db, {
    maxBytes: config.IMPORT_MAX_BYTES,
    maxLineBytes: MAX_LINE_BYTES,
    maxEmailsPerUser: config.MAX_EMAILS_PER_USER,
    claimSeconds: config.UNVERIFIED_CLAIM_SECONDS,
    metadataMaxBytes: config.METADATA_MAX_BYTES,
    base: config.PUBLIC_URL ?? '',
    batch,
    leaseMs,
    counted: (result, lines) => app.metrics.imported(result, lines),
    wroteEvents: () => app.sequencer.wake()
  })
  app.decorate('imports', service)
  const lease = randomBytes(12).toString('hex')
  let stopping = false
  let turns = 0
  const work = new Repeating(pollMs, async () => {
    if (turns++ % CLEANUP_EVERY === 0) await service.cleanup(Date.now())
    while (!stopping && await service.workOne(lease, () => stopping)) { /* the next import */ }
  }, (err) => app.log.warn({ err }, 'imports: an import could not be worked on; trying again'))
  app.addHook('onReady', async () => work.start())
  app.addHook('preClose', async () => {
    stopping = true
    await work.stop()
  })
}

export default fp(importWorker, { name: 'imports', dependencies: ['database', 'metrics', 'events'] })
