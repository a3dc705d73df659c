import type { FastifyReply, FastifyRequest, onSendAsyncHookHandler, RouteOptions } from 'fastify'
import { digestTag, noneMatch } from './etag.js'

async function conditional(request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  if (reply.statusCode !== 200) return payload
  let etag = reply.getHeader('etag') as string | undefined
  if (etag === undefined) {
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload
    etag = digestTag(payload)
    reply.header('etag', etag)
  }
  if (!noneMatch(request.headers['if-none-match'], etag)) return payload
  reply.code(304)
  reply.removeHeader('content-type')
  reply.removeHeader('content-length')
  return null
}

/**
 * The conditional-get step: every 200 answer to a GET carries an ETag (the route's own, from the resource version,
 * or else a digest of the body), and an If-None-Match naming it answers 304 with no body. GET and HEAD routes only.
 */
export const conditionalGetStep = (route: RouteOptions): onSendAsyncHookHandler | undefined =>
  [route.method].flat().some((method) => method === 'GET' || method === 'HEAD') ? conditional : undefined
