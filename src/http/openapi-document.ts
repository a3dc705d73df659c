/**
 * Completes the OpenAPI document generated from the route schemas with what a schema cannot say: the headers
 * each answer carries, 304 answers, and the bare-value bodies of key paths.
 */

type Obj = Record<string, any>

const HEADERS: Obj = {
  ETag: { description: 'Version of the representation; send it back in If-None-Match or If-Match', schema: { type: 'string' } },
  Location: { description: 'URL of the created resource', schema: { type: 'string' } },
  Link: { description: '`<next page>; rel="next"` while there is a next page', schema: { type: 'string' } },
  RetryAfter: { description: 'Seconds to wait before trying again', schema: { type: 'integer' } },
  RateLimitPolicy: { description: 'The rate limit that applies (IETF httpapi draft): `"default";q=<requests>;w=<seconds>`', schema: { type: 'string' } },
  RateLimit: { description: 'What is left of it: `"default";r=<remaining>;t=<seconds until the window resets>`', schema: { type: 'string' } },
  WWWAuthenticate: {
    description: '`Bearer realm="api"`; with `error="insufficient_scope"` when the caller is authenticated but not allowed (do not refresh the token)',
    schema: { type: 'string' }
  }
}

const header = (name: string) => ({ $ref: `#/components/headers/${name}` })

const METHODS = ['get', 'put', 'post', 'delete', 'patch']

const SUCCESS: Record<string, string> = { 200: 'OK', 201: 'Created', 204: 'No content' }

export interface DocumentOptions {
  /** FORBIDDEN_STATUS: with 403, refusals of authenticated callers are documented as 403 beside the 401. */
  forbiddenStatus: 401 | 403
}

export function completeDocument(doc: Obj, options: DocumentOptions = { forbiddenStatus: 401 }): Obj {
  doc.components ??= {}
  doc.components.headers = { ...HEADERS, ...(doc.components.headers ?? {}) }
  for (const item of Object.values<Obj>(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method]
      if (!op) continue
      const responses: Obj = op.responses ?? {}
      if (options.forbiddenStatus === 403 && responses['401'] && op.security === undefined) {
        responses['401'] = { ...responses['401'], description: 'Not authenticated (UNAUTHENTICATED)' }
        responses['403'] = { ...responses['401'], description: 'Authenticated but not allowed (FORBIDDEN and route-specific codes)' }
      }
      const limited = Boolean(responses['429'])
      for (const [status, response] of Object.entries<Obj>(responses)) {
        if (response.description === 'Default Response' && SUCCESS[status]) response.description = SUCCESS[status]
        const headers: Obj = { ...(response.headers ?? {}) }
        const code = Number(status)
        if (code === 200 || code === 201) headers.ETag = header('ETag')
        if (code === 201) headers.Location = header('Location')
        if (code === 200 && method === 'get' && /Collection$/.test(response.content?.['application/json']?.schema?.$ref ?? '')) {
          headers.Link = header('Link')
        }
        if (code === 401 || code === 403) headers['WWW-Authenticate'] = header('WWWAuthenticate')
        if (limited) {
          headers['RateLimit-Policy'] = header('RateLimitPolicy')
          headers.RateLimit = header('RateLimit')
        }
        if (code === 429 || code === 503) headers['Retry-After'] = header('RetryAfter')
        if (Object.keys(headers).length) response.headers = headers
      }
      if (method === 'get' && responses['200']) {
        responses['304'] = { description: 'Not modified: If-None-Match names the current ETag', headers: { ETag: header('ETag') } }
        op.parameters = [...(op.parameters ?? []), {
          name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' },
          description: 'Answer 304 without a body when the ETag still matches'
        }]
      }
      const content: Obj | undefined = op.requestBody?.content
      for (const type of ['text/plain', 'application/octet-stream']) {
        if (content?.[type]) {
          content[type] = { schema: { type: 'string', description: 'The bare value (UTF-8, surrounding white space trimmed)' } }
        }
      }
    }
  }
  return doc
}
