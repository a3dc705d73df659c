import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { sql } from 'kysely'
import { ApiError } from '../lib/errors.js'
import { only } from './responses.js'

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
      await sql`select 1`.execute(app.db)
    } catch (err) {
      request.log.warn({ err }, 'database not ready')
      throw new ApiError(503, 'UNAVAILABLE', 'The database is unreachable', { headers: { 'retry-after': '5' } })
    }
    reply.header('cache-control', 'no-store')
    return { status: 'ok' as const }
  })
}

export default health
