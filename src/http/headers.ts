import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { REQUEST_ID_HEADER } from './request-id.js'

/**
 * What every request and answer gets before anything else: the request's id (`X-Request-Id`, request-id.ts); answers
 * are JSON or problem+json, never to be sniffed into something a browser would run (`nosniff`); and a content type on
 * a request without a body (a DELETE from a client that sets one on everything) names no body to parse, so it is
 * dropped and the request served as the bodiless request it is.
 */
async function headers(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-content-type-options', 'nosniff')
    reply.header(REQUEST_ID_HEADER, request.id)
    const headers = request.headers
    if (headers['content-type'] !== undefined && headers['transfer-encoding'] === undefined &&
      (headers['content-length'] === undefined || headers['content-length'] === '0')) delete headers['content-type']
  })
}

export default fp(headers, { name: 'headers' })
