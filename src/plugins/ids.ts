import fp from 'fastify-plugin'
import { validationFailed } from '../lib/errors.js'
import { CANONICAL_ID } from '../lib/text.js'

/**
 * Ids are written in canonical decimal. Schema coercion alone would read `01`, `1e0`, `0x1`, `+1` or ` 1` as 1, so
 * path ids (`*_id`) and the `id` filter are checked as the client wrote them, before validation coerces them.
 */
export default fp(async (app) => {
  app.addHook('preValidation', async (request) => {
    const bad: Array<{ path: string; in: 'path' | 'query'; message: string }> = []
    for (const [key, value] of Object.entries(request.params as Record<string, string>)) {
      if (key.endsWith('_id') && !CANONICAL_ID.test(value)) bad.push({ path: `/${key}`, in: 'path', message: 'must be a canonical decimal id' })
    }
    const ids = (request.query as Record<string, unknown> | undefined)?.id
    if (ids !== undefined) {
      for (const [i, value] of (Array.isArray(ids) ? ids : [ids]).entries()) {
        if (typeof value !== 'string' || !CANONICAL_ID.test(value)) bad.push({ path: `/id/${i}`, in: 'query', message: 'must be a canonical decimal id' })
      }
    }
    if (bad.length) throw validationFailed('Ids are positive integers in canonical decimal', bad)
  })
}, { name: 'ids', fastify: '5.x' })
