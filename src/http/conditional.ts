import { createHash } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { noneMatch } from './etag.js'
import type { RouteStep } from './lifecycle.js'

type Done = (err: Error | null, payload?: unknown) => void

function conditional(request: FastifyRequest, reply: FastifyReply, payload: unknown, done: Done) {
  if (reply.statusCode !== 200) return done(null, payload)
  let etag = reply.getHeader('etag') as string | undefined
  if (etag === undefined) {
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload)
    etag = `"${createHash('sha1').update(payload).digest('base64url')}"`
    reply.header('etag', etag)
  }
  if (!noneMatch(request.headers['if-none-match'], etag)) return done(null, payload)
  reply.code(304)
  reply.removeHeader('content-type')
  reply.removeHeader('content-length')
  done(null, null)
}

/**
 * The conditional-get step: every 200 answer to a GET carries an ETag (the route's own, from the resource version,
 * or else a digest of the body), and an If-None-Match naming it answers 304 with no body. GET and HEAD routes only.
 */
export const conditionalGetStep: RouteStep<'onSend'> = (route) =>
  [route.method].flat().some((method) => method === 'GET' || method === 'HEAD') ? conditional : undefined
