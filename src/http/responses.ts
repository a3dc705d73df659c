import { STATUS_CODES } from 'node:http'
import { Type } from '@sinclair/typebox'
import type { FastifyReply } from 'fastify'
import { versionTag } from './etag.js'
import { Problem } from '../../schemas/problem.js'
import { ref } from '../../schemas/ref.js'

const WHY: Record<number, string> = {
  400: 'Invalid input (VALIDATION_FAILED, INVALID_FILTER, INVALID_CURSOR)',
  401: 'Not authenticated (UNAUTHENTICATED) or not allowed (FORBIDDEN and route-specific codes)',
  404: 'Not found',
  409: 'Conflict with the current state',
  422: 'The Idempotency-Key was used with another request (IDEMPOTENCY_KEY_REUSED)',
  412: 'If-Match does not name the current version (PRECONDITION_FAILED)',
  413: 'Request body too large (PAYLOAD_TOO_LARGE)',
  415: 'Unsupported Content-Type (UNSUPPORTED_MEDIA_TYPE)',
  429: 'Too many requests (RATE_LIMITED)',
  503: 'Temporarily unavailable (UNAVAILABLE)'
}

type ProblemResponse = { description: string; content: { 'application/problem+json': { schema: typeof problemRef } } }

/** Error responses of a route, each an RFC 9457 problem; every route may also be rate limited (429) or unavailable (503). */
export function problems(...statuses: number[]) {
  return only(...statuses, 429, 503)
}

/** Exactly these error responses (health checks are never rate limited). */
export function only(...statuses: number[]) {
  const out: Record<number, ProblemResponse> = {}
  for (const status of statuses) {
    out[status] = { description: WHY[status] ?? STATUS_CODES[status] ?? 'Error', content: { 'application/problem+json': { schema: problemRef } } }
  }
  return out
}
const problemRef = ref(Problem)

export const NoContent = Type.Null({ description: 'No content' })

export const IfMatch = Type.Object({ 'if-match': Type.Optional(Type.String({ description: 'Write only if the resource still has this ETag' })) })

/** The header of the POSTs that create or send (routes with `config.idempotent`). */
export const IdempotencyKey = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    minLength: 1, maxLength: 255,
    description: 'A key of your own (a UUID v4) that makes a retry safe: within 24 hours, the same key with the same request answers the first answer again (with `Idempotent-Replayed: true`) and does nothing twice; with another request, 422 IDEMPOTENCY_KEY_REUSED; while the first still runs, 409 IDEMPOTENCY_KEY_IN_USE'
  }))
})

/** Request encodings of every write: the same fields as JSON, a urlencoded form or a multipart form. */
export const FORM_TYPES = ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']

/** A key path also takes the bare value as the whole body, as text or as a file of any type. */
export const KEY_PATH_TYPES = [...FORM_TYPES, 'text/plain', 'application/octet-stream']

/** A single resource's answer: its representation, with the ETag of the version it was read at. */
export function tagged<T>(reply: FastifyReply, version: number, body: T): T {
  reply.header('etag', versionTag(version))
  return body
}

export interface PageOptions<R extends { id: number }, T> {
  base: string
  path: string
  /** The query that selects the collection (limit included, cursor not). */
  params: Array<[string, string]>
  limit: number
  /** The cursor this page was asked with, if any. */
  cursor: string | undefined
  /** Rows fetched with one more than `limit`: its presence says a next page exists. */
  rows: R[]
  nextCursor: (lastId: number) => string
  present: (row: R) => T
}

/** A collection's answer (seed rule 1): its href, its items, the next page's link (also as a Link header). */
export function collection<R extends { id: number }, T>(reply: FastifyReply, o: PageOptions<R, T>) {
  const page = o.rows.slice(0, o.limit)
  const last = page[page.length - 1]
  const next = o.rows.length > o.limit && last
    ? collectionHref(o.base, o.path, [...o.params, ['cursor', o.nextCursor(last.id)]])
    : null
  if (next) reply.header('link', `<${next}>; rel="next"`)
  return {
    href: collectionHref(o.base, o.path, o.cursor === undefined ? o.params : [...o.params, ['cursor', o.cursor]]),
    items: page.map(o.present),
    next
  }
}

/** A collection's link: its path and the query that selects it, in a stable order. */
export function collectionHref(base: string, path: string, params: Array<[string, string]>): string {
  const query = new URLSearchParams(params).toString()
  return base + path + (query ? `?${query}` : '')
}
