import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

/** The header a request id travels in, both ways. */
export const REQUEST_ID_HEADER = 'x-request-id'

/** What a client's (or a load balancer's) own id may look like to be taken as it is. */
export const TAKEN_AS_SENT = /^[A-Za-z0-9._:-]{1,128}$/

/**
 * The id of a request (Fastify's `genReqId`): the client's own `X-Request-Id` when it sent one of up to 128 of
 * `A-Z a-z 0-9 . _ : -`, so that a trace that began at a load balancer or in an app goes on through Roster;
 * otherwise a random UUID, unique across restarts and instances. Anything else a client sends there (a second
 * header, other characters, more length) is replaced, never echoed: it would reach logs and events.
 */
export function requestId(req: IncomingMessage): string {
  const sent = req.headers[REQUEST_ID_HEADER]
  return typeof sent === 'string' && TAKEN_AS_SENT.test(sent) ? sent : randomUUID()
}
