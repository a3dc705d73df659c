import { Readable } from 'node:stream'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { ExportQuery } from '../../schemas/import.js'
import { causeOf } from '../auth/steps.js'
import { openSnapshot } from '../database/snapshot.js'
import { problems } from '../http/responses.js'
import { ExportsService } from './service.js'

/** Users read and written per step of an export. */
const BATCH = 500

/** Exports: every user, streamed as the roster import format. Admins only. */
const exportRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const service = new ExportsService(app.db, {
    snapshot: () => openSnapshot(app.db, app.dialect, app.config.DATABASE_URL),
    batch: BATCH,
    exported: (users) => app.metrics.exported(users),
    wroteEvent: () => app.sequencer.wake()
  })

  app.get('/exports/users', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'exportUsers', tags: ['imports'], summary: 'Every user, as NDJSON an import reads back',
      description: 'One user a line, ordered by id, from one consistent snapshot, streamed as the client reads it. `include=password_hash` adds each password hash (Roster\'s argon2id, or a foreign hash not yet replaced). Writes a `users.exported` event.',
      querystring: ExportQuery,
      response: {
        200: { description: 'NDJSON: one roster import line per user', content: { 'application/x-ndjson': { schema: { type: 'string' } } } },
        ...problems([400, 'VALIDATION_FAILED'], 401)
      }
    }
  }, async (request, reply) => {
    const lines = service.users(request.query.include === 'password_hash', causeOf(request))
    reply.type('application/x-ndjson').header('cache-control', 'no-store')
    return reply.send(Readable.from(lines))
  })
}

export default exportRoutes
