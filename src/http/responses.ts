import { STATUS_CODES } from 'node:http'
import { Type } from '@sinclair/typebox'
import type { FastifyReply } from 'fastify'
import { PAGE_SIZE } from '../../schemas/common.js'
import type { CursorCodec } from './cursor.js'
import { versionTag } from './etag.js'
import { Problem, type ErrorCode } from '../../schemas/problem.js'
import { ref } from '../../schemas/ref.js'

/** What each error status means, and the codes it carries on every route that answers it. */
const WHY: Record<number, [string, ErrorCode[]]> = {
  400: ['Invalid input', ['VALIDATION_FAILED']],
  401: ['Not authenticated, or not allowed', ['UNAUTHENTICATED', 'FORBIDDEN']],
  404: ['Not found', []],
  409: ['Conflict with the current state', []],
  412: ['If-Match does not name the current version', ['PRECONDITION_FAILED']],
  413: ['Request body too large', ['PAYLOAD_TOO_LARGE']],
  415: ['Unsupported Content-Type', ['UNSUPPORTED_MEDIA_TYPE']],
  422: ['The Idempotency-Key was used with another request', ['IDEMPOTENCY_KEY_REUSED']],
  429: ['Too many requests', ['RATE_LIMITED']],
  503: ['Temporarily unavailable', ['UNAVAILABLE']]
}

type ProblemResponse = { description: string; content: { 'application/problem+json': { schema: typeof problemRef } } }

/** An error status, alone (its usual codes) or with the codes this route answers it with. */
export type ProblemStatus = number | [number, ...ErrorCode[]]

/**
 * Error responses of a route, each an RFC 9457 problem, described with the codes the route can answer; every route
 * may also be rate limited (429) or unavailable (503).
 */
export function problems(...statuses: ProblemStatus[]) {
  return only(...statuses, 429, 503)
}

/** Exactly these error responses (health checks are never rate limited). */
export function only(...statuses: ProblemStatus[]) {
  const out: Record<number, ProblemResponse> = {}
  for (const entry of statuses) {
    const [status, ...named] = typeof entry === 'number' ? [entry] : entry
    const [why, usual] = WHY[status] ?? [STATUS_CODES[status] ?? 'Error', []]
    const codes = named.length > 0 ? named : usual
    out[status] = {
      description: codes.length > 0 ? `${why} (${codes.join(', ')})` : why,
      content: { 'application/problem+json': { schema: problemRef } }
    }
  }
  return out
}
const problemRef = ref(Problem)

export const NoContent = Type.Null({ description: 'No content' })

export const IfMatch = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'Write only if the resource still has this ETag (412 PRECONDITION_FAILED otherwise)' }))
})

/** The header of the POSTs that create or send (routes with `config.idempotent`). */
export const IdempotencyKey = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    minLength: 1, maxLength: 255,
    description: 'A key of your own (a UUID v4) that makes a retry safe: within 24 hours, the same key with the same request answers the first answer again (with `Idempotent-Replayed: true`) and does nothing twice; with another request, 422 IDEMPOTENCY_KEY_REUSED; while the first still runs, 409 IDEMPOTENCY_KEY_IN_USE'
  }))
})

/** Request encodings of every write: the same fields as JSON, a urlencoded form or a multipart form. */
export const FORM_TYPES = ['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']

/** A single resource's answer: its representation, with the ETag of the version it was read at. */
export function tagged<T>(reply: FastifyReply, version: number, body: T, ended = false): T {
  reply.header('etag', versionTag(version, ended))
  return body
}

export interface PageOptions<R, T> {
  base: string
  path: string
  /** The query that selects the collection (limit included, cursor not). */
  params: Array<[string, string]>
  limit: number
  /** The cursor this page was asked with, if any. */
  cursor: string | undefined
  /** The query parameter the cursor goes in: `cursor`, unless the collection names it otherwise (`after`). */
  cursorParam?: string
  /** Rows fetched with one more than `limit`: its presence says a next page exists. */
  rows: R[]
  /** The cursor of the page after the one ending with `last`. */
  nextCursor: (last: R) => string
  present: (row: R) => T
}

/** A collection's answer (version 1's rule 1): its href, its items, the next page's link (also as a Link header). */
export function collection<R, T>(reply: FastifyReply, o: PageOptions<R, T>) {
  const page = o.rows.slice(0, o.limit)
  const last = page[page.length - 1]
  const param = o.cursorParam ?? 'cursor'
  const next = o.rows.length > o.limit && last !== undefined
    ? collectionHref(o.base, o.path, [...o.params, [param, o.nextCursor(last)]])
    : null
  if (next) reply.header('link', `<${next}>; rel="next"`)
  return {
    href: collectionHref(o.base, o.path, o.cursor === undefined ? o.params : [...o.params, [param, o.cursor]]),
    items: page.map(o.present),
    next
  }
}

/**
 * A page of a collection under one user (`/users/{id}/emails`, `/users/{id}/sessions`): `limit` defaulted, the
 * cursor decoded within `scope` (a cursor of another collection is INVALID_CURSOR), the rows after it fetched, and
 * the page answered with its links.
 */
export async function pageUnder<R extends { id: number }, T>(reply: FastifyReply, o: {
  base: string
  path: string
  scope: string
  query: { limit?: number | undefined; cursor?: string | undefined }
  /** The collection's own filters, before the page size in its links. */
  params?: Array<[string, string]>
  cursors: CursorCodec
  fetch: (afterId: number, limit: number) => Promise<R[]>
  present: (row: R) => T
}) {
  const limit = o.query.limit ?? PAGE_SIZE
  const cursor = o.query.cursor
  const after = cursor === undefined ? 0 : o.cursors.decode(cursor, o.scope)
  return collection(reply, {
    base: o.base, path: o.path, params: [...(o.params ?? []), ['limit', String(limit)]], limit, cursor, rows: await o.fetch(after, limit),
    nextCursor: (last) => o.cursors.encode(last.id, o.scope), present: o.present
  })
}

/** A collection's link: its path and the query that selects it, in a stable order. */
export function collectionHref(base: string, path: string, params: Array<[string, string]>): string {
  const query = new URLSearchParams(params).toString()
  return base + path + (query ? `?${query}` : '')
}
