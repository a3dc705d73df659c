import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

/** After an answer that leaves a body unread: how long the client may go quiet, and how long it is read at most. */
export const LINGER_IDLE_MS = 2_000
export const LINGER_MAX_MS = 30_000

/** Requests a closing connection may still bring (each held, unanswered, until it closes) before it is cut. */
const MAX_DROPPED = 8

/**
 * An answer that goes out before its request's body has been read (a body over the limit, of a type nobody takes,
 * sent to an unknown path, refused before it was needed) ends the connection, and ends it the way HTTP clients can
 * read: the answer, then a half-close, then whatever the client still sends read and dropped until it has sent it
 * all and closed its side, goes quiet for LINGER_IDLE_MS, or LINGER_MAX_MS have passed. Closing at once, as Node
 * does after `Connection: close`, makes the kernel reset a connection with unread bytes, and a client still
 * uploading then loses the answer (a broken pipe instead of a 413). A request pipelined behind such an answer is
 * dropped unserved (RFC 9112, 9.6): the client, told the connection closes, sends it again elsewhere.
 *
 * A body that has arrived whole by the time the answer goes (small bodies come in the packet of their headers) keeps
 * the connection alive as usual. Registered first, so that its onRequest hook runs before any other.
 */
async function unreadBodies(app: FastifyInstance): Promise<void> {
  // Connections closing after such an answer, and how many requests each has brought since: what still arrives on
  // them is read and dropped, never served. A client that keeps sending requests there is cut past MAX_DROPPED, so
  // that the unanswered requests Node holds for a connection stay few. Closing the app cuts them all at once.
  const lingering = new Map<Socket, number>()
  app.addHook('onRequest', async (request, reply) => {
    const socket = request.raw.socket as Socket | null
    const dropped = socket === null ? undefined : lingering.get(socket)
    if (socket === null || dropped === undefined) return
    reply.hijack()
    request.raw.resume()
    if (dropped + 1 >= MAX_DROPPED) socket.destroy()
    else lingering.set(socket, dropped + 1)
  })
  app.addHook('preClose', async () => {
    for (const socket of lingering.keys()) socket.destroy()
  })
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const raw = request.raw
    // `complete` is false until the last byte of the body has been parsed (an injected request has no such flag). A
    // request that declares no body has none to read, even while pipelining keeps its end from being parsed yet.
    if (raw.complete !== false || raw.socket === null || !declaresBody(raw.headers)) return payload
    // An answer decided from the headers alone is sent from within the parser's callback, before it has read the
    // rest of the packet: once that is read, a small body is complete.
    await new Promise((resolve) => setImmediate(resolve))
    if (!raw.complete && raw.socket !== null) {
      reply.header('connection', 'close')
      reply.raw.once('finish', () => dropRest(raw))
      lingerOnClose(raw.socket, lingering)
    }
    return payload
  })
}

function declaresBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length']
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/** Whoever was reading the body (a parser, a multipart reader) lets go: what is left is dropped as it comes. */
function dropRest(raw: IncomingMessage): void {
  raw.unpipe()
  raw.removeAllListeners('data')
  raw.resume()
}

/**
 * Node ends a `Connection: close` answer with `socket.destroySoon()`; for this socket alone that becomes a
 * lingering close. Its timers are the socket's and end with it.
 */
function lingerOnClose(socket: Socket, lingering: Map<Socket, number>): void {
  if (lingering.has(socket)) return
  lingering.set(socket, 0)
  socket.once('close', () => lingering.delete(socket))
  socket.destroySoon = function lingeringClose(this: Socket) {
    if (this.writable) this.end()
    const cap = setTimeout(() => this.destroy(), LINGER_MAX_MS)
    this.setTimeout(LINGER_IDLE_MS, () => this.destroy())
    this.once('close', () => clearTimeout(cap))
    this.once('end', () => this.destroy())
  }
}

export default fp(unreadBodies, { name: 'unread-bodies' })
