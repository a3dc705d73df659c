import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Problem } from '../../schemas/problem.js'

/**
 * Errors Node's HTTP parser meets before Fastify sees a request (both Content-Length and Transfer-Encoding, a NUL or a
 * folded header, a request line or headers over 16 KiB, a request too slow to arrive): answered as problem+json too,
 * on a connection then closed.
 */
export function clientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy()
    return
  }
  const [status, code, detail]: [number, Problem['code'], string] =
    err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'HEADERS_TOO_LARGE', 'The request line or headers are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'REQUEST_TIMEOUT', 'The request took too long to arrive']
        : [400, 'BAD_REQUEST', 'The request is not well-formed HTTP']
  const title = STATUS_CODES[status] ?? 'Error'
  // No request was parsed, so none of its headers is taken: the id is the service's own.
  const id = randomUUID()
  const body = JSON.stringify({ type: 'about:blank', title, status, code, detail, request_id: id } satisfies Problem)
  socket.end(`HTTP/1.1 ${status} ${title}\r\nConnection: close\r\nContent-Type: application/problem+json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nX-Content-Type-Options: nosniff\r\nX-Request-Id: ${id}\r\n\r\n${body}`)
}
