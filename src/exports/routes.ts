import { Readable } from 'node:stream'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { UserParams } from '../../schemas/common.js'
import { ExportQuery } from '../../schemas/import.js'
import { Type } from '@sinclair/typebox'
import { callerOf, causeOf } from '../auth/steps.js'
import { openSnapshot } from '../database/snapshot.js'
import { problems } from '../http/responses.js'
import { ExportsService, userData } from './service.js'

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

  app.get('/users/:user_id/export', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'exportUser', tags: ['users'], summary: 'Everything held about a user',
      description: 'One JSON document: the user, its addresses, its sessions, the metadata the caller may read and its events (a plain user never sees `private` metadata), streamed as the client reads it. For the user itself (a copy of its data on request) or an admin.',
      params: UserParams,
      response: {
        // A reference by name alone: the document is streamed, not serialized from an object of that type.
        200: { description: 'The user\'s data', content: { 'application/json': { schema: Type.Ref('UserData') } } },
        ...problems(400, 401, [404, 'USER_NOT_FOUND'])
      }
    }
  }, async (request, reply) => {
    const document = await userData(app.db, callerOf(request), request.params.user_id, app.config.PUBLIC_URL ?? '', BATCH)
    reply.type('application/json; charset=utf-8').header('cache-control', 'no-store')
    return reply.send(Readable.from(document))
  })
}

export default exportRoutes
