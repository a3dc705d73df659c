import type { preValidationAsyncHookHandler, RouteOptions } from 'fastify'
import type { FieldError } from '../../schemas/problem.js'
import { InvalidInput } from '../common/errors.js'

/** A canonical decimal id: no sign, no leading zero, no exponent, no white space, at most 16 digits. */
export const CANONICAL_ID = /^[1-9][0-9]{0,15}$/
const NOT_CANONICAL = 'must be a canonical decimal id, at most 2^53-1'

/** Canonical, and small enough for every client language to read exactly (2^53-1): a longer one is not another row. */
const isId = (text: string) => CANONICAL_ID.test(text) && Number(text) <= Number.MAX_SAFE_INTEGER

/**
 * The canonical-ids step. Ids are written in canonical decimal; schema coercion alone would read `01`, `1e0`, `0x1`,
 * `+1` or ` 1` as 1, so path ids (`*_id`) and the `id` filter are checked as the client wrote them, before
 * validation coerces them. Only routes that have such a parameter get the step.
 */
export function canonicalIdsStep(route: RouteOptions): preValidationAsyncHookHandler | undefined {
  const pathIds = [...route.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!).filter((name) => name.endsWith('_id'))
  const querystring = route.schema?.querystring as { properties?: Record<string, unknown> } | undefined
  const queryIds = querystring?.properties?.id !== undefined
  if (pathIds.length === 0 && !queryIds) return undefined

  return async (request) => {
    const bad: FieldError[] = []
    const params = request.params as Record<string, string>
    for (const key of pathIds) {
      if (!isId(params[key] ?? '')) bad.push({ path: `/${key}`, in: 'path', message: NOT_CANONICAL })
    }
    const ids = queryIds ? (request.query as Record<string, unknown> | undefined)?.id : undefined
    if (ids !== undefined) {
      for (const [i, value] of (Array.isArray(ids) ? ids : [ids]).entries()) {
        if (typeof value !== 'string' || !isId(value)) bad.push({ path: `/id/${i}`, in: 'query', message: NOT_CANONICAL })
      }
    }
    if (bad.length) throw new InvalidInput('Ids are positive integers in canonical decimal', bad)
  }
}
