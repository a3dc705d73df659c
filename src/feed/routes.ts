import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { PAGE_SIZE, UserParams } from '../../schemas/common.js'
import { EventCollection, EventQuery, UserEventQuery } from '../../schemas/event.js'
import { ref } from '../../schemas/ref.js'
import { typesOf } from '../events/types.js'
import { collection, problems } from '../http/responses.js'
import { presentEvent, withoutPrivate } from '../events/present.js'
import { callerOf } from '../auth/steps.js'

const tags = ['events']

/** The type filter of a query: undefined for every type. */
const typeFilter = (patterns: string[] | undefined) =>
  patterns === undefined ? undefined : typesOf(patterns, { in: 'query', path: '/type', code: 'INVALID_FILTER' })

/** The feed of events, and a user's own activity. */
const feed: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.feed

  app.get('/events', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'listEvents', tags, summary: 'Follow every change, oldest first',
      description: 'Every event in the order it became visible. Follow `next` to the end (it is null on the page that reaches the newest event); come back later with `after` set to the id of the last event seen: you get exactly what came after it, never missing one and never seeing one twice, however the transactions that wrote them interleaved.',
      querystring: EventQuery,
      response: { 200: ref(EventCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_FILTER', 'INVALID_CURSOR'], 401) }
    }
  }, async (request, reply) => {
    const q = request.query
    const limit = q.limit ?? PAGE_SIZE
    const params: Array<[string, string]> = []
    for (const t of q.type ?? []) params.push(['type', t])
    if (q.user_id !== undefined) params.push(['user_id', String(q.user_id)])
    params.push(['limit', String(limit)])
    return collection(reply, {
      base, path: '/events', params, limit, cursor: q.after, cursorParam: 'after',
      rows: await service.feed({ types: typeFilter(q.type), userId: q.user_id }, q.after, limit),
      nextCursor: (last) => last.public_id,
      present: presentEvent
    })
  })

  app.get('/users/:user_id/events', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'listUserEvents', tags, summary: 'A user\'s recent activity, newest first',
      description: 'The account\'s own events (sign-ins, failed sign-ins, sessions ended, password, address and metadata changes), newest first, so an app can show recent security activity. A plain user never sees `private` metadata in them.',
      params: UserParams, querystring: UserEventQuery,
      response: { 200: ref(EventCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_FILTER', 'INVALID_CURSOR'], 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const q = request.query
    const userId = request.params.user_id
    const admin = callerOf(request).role === 'admin'
    const limit = q.limit ?? PAGE_SIZE
    const params: Array<[string, string]> = []
    for (const t of q.type ?? []) params.push(['type', t])
    params.push(['limit', String(limit)])
    return collection(reply, {
      base, path: `/users/${userId}/events`, params, limit, cursor: q.after, cursorParam: 'after',
      rows: await service.activity(userId, typeFilter(q.type), q.after, limit),
      nextCursor: (last) => last.public_id,
      present: admin ? presentEvent : (row) => withoutPrivate(presentEvent(row))
    })
  })
}

export default feed
