import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Unavailable } from '../common/errors.js'
import { ping } from '../database/index.js'
import { only } from '../http/responses.js'

const Health = Type.Object({ status: Type.Literal('ok') }, { additionalProperties: false })
const tags = ['health']

const health: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/health/live', {
    config: { auth: 'public' },
    schema: { operationId: 'getLiveness', tags, summary: 'The process is up', response: { 200: Health, ...only(503) } }
  }, async () => ({ status: 'ok' as const }))

  app.get('/health/ready', {
    config: { auth: 'public' },
    schema: { operationId: 'getReadiness', tags, summary: 'The database answers', response: { 200: Health, ...only(503) } }
  }, async (request, reply) => {
    try {
      await ping(app.db)
    } catch (err) {
      request.log.warn({ err }, 'database not ready')
      throw new Unavailable('The database is unreachable')
    }
    reply.header('cache-control', 'no-store')
    return { status: 'ok' as const }
  })
}

export default health
