import type { FastifyReply, onSendAsyncHookHandler, preHandlerAsyncHookHandler, RouteOptions } from 'fastify'
import { invalidField } from '../common/errors.js'
import type { IdempotencyKeys } from './service.js'

/** A key as clients send them (a UUID, usually): printable ASCII without spaces, 1 to 255 characters. */
const KEY = /^[\x21-\x7e]{1,255}$/

/** Header names of the kept answer that a replay sends again. */
const header = (reply: FastifyReply, name: string): string | null => {
  const value = reply.getHeader(name)
  return value === undefined ? null : String(value)
}

/**
 * The idempotency step, for routes that declare `config.idempotent` (the POSTs that create or send): after
 * authorization and validation, a request with an `Idempotency-Key` either takes the key and runs, or answers what
 * the first request with that key answered (`Idempotent-Replayed: true`), or is refused (409 while the first runs,
 * 422 for another request under the same key). Requests without the header run as ever.
 */
export function idempotencyStep(keys: IdempotencyKeys): (route: RouteOptions) => preHandlerAsyncHookHandler | undefined {
  return (route) => {
    if (!route.config?.idempotent) return undefined
    return async (request, reply) => {
      const key = request.headers['idempotency-key']
      if (key === undefined) return
      if (typeof key !== 'string' || !KEY.test(key)) {
        throw invalidField('/idempotency-key', 'header', 'must be 1 to 255 printable ASCII characters without spaces (a UUID, say)')
      }
      const scope = request.caller ? `u${request.caller.id}` : 'anonymous'
      const keyHash = keys.keyHash(scope, key)
      const seal = keys.seal(scope, key)
      const outcome = await keys.begin(keyHash, keys.requestHash(request.method, request.url, request.body), seal)
      if (outcome.run) {
        request.idempotencyKey = { hash: keyHash, seal }
        return
      }
      const { answer } = outcome
      reply.code(answer.status).header('idempotent-replayed', 'true')
      if (answer.location) reply.header('location', answer.location)
      if (answer.etag) reply.header('etag', answer.etag)
      if (answer.contentType) reply.type(answer.contentType)
      return reply.send(answer.body)
    }
  }
}

/** The `user_id` of a route's path, validated by its schema: the user its answer is about. */
const routeUser = (params: unknown): number | null => {
  const id = (params as { user_id?: unknown } | undefined)?.user_id
  return typeof id === 'number' ? id : null
}

/** Keeps the answer of a request that took a key (onSend: the body as sent), before it goes out. */
export function idempotencyRecordStep(keys: IdempotencyKeys): (route: RouteOptions) => onSendAsyncHookHandler | undefined {
  return (route) => {
    if (!route.config?.idempotent) return undefined
    return async (request, reply, payload) => {
      const taken = request.idempotencyKey
      if (!taken) return payload
      request.idempotencyKey = null
      try {
        await keys.finish(taken.hash, taken.seal, {
          status: reply.statusCode,
          contentType: header(reply, 'content-type'),
          location: header(reply, 'location'),
          etag: header(reply, 'etag'),
          body: typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : ''
        }, routeUser(request.params))
      } catch (err) {
        // The answer still goes out; a retry within the abandonment delay gets 409, after it runs again.
        request.log.warn({ err }, 'idempotency: the answer could not be kept')
      }
      return payload
    }
  }
}
