import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Unavailable } from '../common/errors.js'
import { isUnavailable } from '../database/errors.js'
import { ping } from '../database/index.js'
import { only } from '../http/responses.js'

const Health = Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false })
const tags = ['health']

const health: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/health/live', {
    config: { auth: 'public' },
    schema: {
      operationId: 'getLiveness', tags, summary: 'The process is up',
      description: 'For a balancer\'s liveness probe: answers while the process runs, whatever the database does. Never rate limited.',
      response: { 200: Health, ...only(503) }
    }
  }, async () => ({ status: 'ok' as const }))

  app.get('/health/ready', {
    config: { auth: 'public' },
    schema: {
      operationId: 'getReadiness', tags, summary: 'The database answers',
      description: 'For a balancer\'s readiness probe: 503 while the database is unreachable or the service is shutting down. Never rate limited.',
      response: { 200: Health, ...only(503) }
    }
  }, async (request, reply) => {
    try {
      await ping(app.db)
    } catch (err) {
      // A driver's "unreachable" goes to the error handler as it is, to be logged once per outage; anything else is
      // logged here, since the 503 it becomes is an answer the error handler does not log.
      if (isUnavailable(err)) throw err
      request.log.error({ err }, 'readiness: the database check failed')
      throw new Unavailable('The database is unreachable')
    }
    reply.header('cache-control', 'no-store')
    return { status: 'ok' as const }
  })
}

export default health
