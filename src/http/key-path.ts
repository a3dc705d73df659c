import type { FastifyInstance, FastifyRequest } from 'fastify'
import { bareValue, fileText } from './bodies.js'

/**
 * Largest body a key path accepts: its longest values (a ban's 500-character reason, two 256-character passwords)
 * written in JSON's longest escapes, twelve bytes a character (a surrogate pair).
 */
export const KEY_PATH_BODY_LIMIT = 8192

/**
 * Lets the routes of this (encapsulated) context take any body: a body of a type without a parser of its own
 * (a file sent with `curl -T`, `application/octet-stream`, no Content-Type at all) arrives as raw bytes.
 */
export async function acceptRawBodies(app: FastifyInstance): Promise<void> {
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: KEY_PATH_BODY_LIMIT }, (_request, body, done) => {
    done(null, body)
  })
}

/** How an operation's description tells of the bare-value encodings, which the document does not list as media types. */
export const BARE_VALUE_NOTE = 'The value may also be sent bare: as `text/plain`, or as a file of any content type (the whole body, UTF-8, surrounding white space trimmed).'

/**
 * The body of a key path (a path ending in a field name): an object holding that field, in any encoding, or the
 * bare value as the whole body, trimmed (a password never is). This preValidation hook brings every encoding to that
 * object, which the route's named schema (schemas/) then validates.
 */
export function keyPathBody(key: string) {
  return async (request: FastifyRequest) => {
    const body: unknown = request.body
    if (body === undefined || body === null) request.body = {}
    else if (Buffer.isBuffer(body)) request.body = { [key]: fileText(body, key) }
    else if (typeof body === 'string') request.body = { [key]: bareValue(body, key) }
    else if (typeof body !== 'object' || Array.isArray(body)) request.body = { [key]: body }
  }
}
