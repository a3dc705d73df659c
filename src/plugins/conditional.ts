import { createHash } from 'node:crypto'
import fp from 'fastify-plugin'
import { noneMatch } from '../lib/etag.js'

/**
 * Conditional GETs: every 200 answer to a GET carries an ETag (the route's own, from the resource version, or
 * else a digest of the body), and an If-None-Match naming it answers 304 with no body.
 */
export default fp(async (app) => {
  app.addHook('onSend', async (request, reply, payload) => {
    if ((request.method !== 'GET' && request.method !== 'HEAD') || reply.statusCode !== 200) return payload
    let etag = reply.getHeader('etag') as string | undefined
    if (etag === undefined) {
      if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload
      etag = `"${createHash('sha1').update(payload).digest('base64url')}"`
      reply.header('etag', etag)
    }
    if (!noneMatch(request.headers['if-none-match'], etag)) return payload
    reply.code(304)
    reply.removeHeader('content-type')
    reply.removeHeader('content-length')
    return null
  })
}, { name: 'conditional', fastify: '5.x' })
