import type { IncomingHttpHeaders } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'

/** After an answer that leaves a body unread: how long the client may go quiet, and how long it is read at most. */
export const LINGER_IDLE_MS = 2_000
export const LINGER_MAX_MS = 30_000

/**
 * An answer that goes out before its request's body has been read (a body over the limit, of a type nobody takes,
 * sent to an unknown path, refused before it was needed) ends the connection, and ends it the way HTTP clients can
 * read: the answer, then a half-close, then whatever the client still sends read and dropped until it has sent it
 * all and closed its side, goes quiet for LINGER_IDLE_MS, or LINGER_MAX_MS have passed. Closing at once, as Node
 * does after `Connection: close`, makes the kernel reset a connection with unread bytes, and a client still
 * uploading then loses the answer (a broken pipe instead of a 413).
 *
 * A body read in full (small bodies arrive with their headers) keeps the connection alive as usual.
 */
export function installUnreadBodies(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    const raw = request.raw
    // `complete` is false until the last byte of the body has been received (an injected request has no such flag).
    // A request that declares no body has none to read, even while pipelining keeps its end from being parsed yet.
    if (raw.complete !== false || raw.socket === null || !declaresBody(raw.headers)) return done(null, payload)
    reply.header('connection', 'close')
    const socket = raw.socket
    reply.raw.once('finish', () => {
      // Whoever was reading the body (a parser, a multipart reader) lets go: what is left is dropped as it comes.
      raw.unpipe()
      raw.removeAllListeners('data')
      raw.resume()
    })
    lingerOnClose(socket)
    done(null, payload)
  })
}

function declaresBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length']
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/**
 * Node ends a `Connection: close` answer with `socket.destroySoon()`; for this socket alone that becomes a
 * lingering close. Its timers are the socket's and end with it.
 */
function lingerOnClose(socket: Socket): void {
  socket.destroySoon = function lingeringClose(this: Socket) {
    if (this.writable) this.end()
    const cap = setTimeout(() => this.destroy(), LINGER_MAX_MS)
    this.setTimeout(LINGER_IDLE_MS, () => this.destroy())
    this.once('close', () => clearTimeout(cap))
    this.once('end', () => this.destroy())
  }
}
