import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Id, PageQuery, UserParams } from '../../schemas/common.js'
import { ref } from '../../schemas/ref.js'
import { SessionCollection } from '../../schemas/session.js'
import { callerOf } from '../http/authenticate.js'
import { withMultipart } from '../http/bodies.js'
import { NoContent, pageUnder, problems } from '../http/responses.js'
import { presentSession } from './present.js'

const tags = ['sessions']


const SessionParams = Type.Object({ user_id: Id, session_id: Id }, { additionalProperties: false })

const sessions: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.sessions

  app.get('/users/:user_id/sessions', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'listUserSessions', tags, summary: 'List the live sessions of a user',
      description: 'Each login is a session; `current` marks the one the calling token belongs to.',
      params: UserParams, querystring: PageQuery,
      response: { 200: ref(SessionCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const userId = request.params.user_id
    const current = callerOf(request).session_id
    return pageUnder(reply, {
      base, path: `/users/${userId}/sessions`, scope: `sessions:${userId}`, query: request.query, cursors: app.cursors,
      fetch: (after, limit) => service.list(userId, after, limit),
      present: (row) => presentSession(row, base, current)
    })
  })

  await app.register(withMultipart(sessionWrites))
}

/** Ending sessions: in the scope of the routes that may carry a body, as every other DELETE. */
const sessionWrites: FastifyPluginAsyncTypebox = async (writes) => {
  const service = writes.services.sessions
  writes.delete('/users/:user_id/sessions/:session_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'deleteUserSession', tags, summary: 'End one session of a user',
      description: 'Its access and refresh tokens stop working at once. 404 SESSION_NOT_FOUND when the user has no such session.',
      params: SessionParams,
      response: { 204: NoContent, ...problems(400, 401, [404, 'USER_NOT_FOUND', 'SESSION_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    await service.end(request.params.user_id, request.params.session_id)
    return reply.code(204).send(null)
  })

  writes.delete('/users/:user_id/sessions', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'deleteUserSessions', tags, summary: 'Sign out everywhere: end every session of a user',
      description: 'The calling session included.',
      params: UserParams,
      response: { 204: NoContent, ...problems(400, 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    await service.endAll(request.params.user_id)
    return reply.code(204).send(null)
  })
}

export default sessions
