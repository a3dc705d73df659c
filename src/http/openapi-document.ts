import { EVENT_TYPES, typedEventName } from '../../schemas/event.js'
import type { OpenAPIV3_1 } from 'openapi-types'
import { TAKEN_AS_SENT } from './request-id.js'

/**
 * Completes the OpenAPI document generated from the route schemas with what a schema cannot say: the headers
 * each answer carries, 304 answers, examples of problems, paging, and the components shared between operations.
 */

type Document = OpenAPIV3_1.Document
type Operation = OpenAPIV3_1.OperationObject<{ 'x-pagination'?: Record<string, string> }>
type Response = OpenAPIV3_1.ResponseObject
type Parameter = OpenAPIV3_1.ParameterObject
type Reference = OpenAPIV3_1.ReferenceObject

const isReference = (value: object): value is Reference => '$ref' in value
/** The `$ref` of a schema, when it is a reference ('' otherwise). */
const refOf = (schema: OpenAPIV3_1.SchemaObject | Reference | undefined) => (schema && isReference(schema) ? schema.$ref : '')
/** A JSON copy of a plain document value: a shared form compared by its text, taken back out as a value. */
const copy = <T>(value: T): T => structuredClone(value)

const HEADERS: Record<string, OpenAPIV3_1.HeaderObject> = {
  ETag: { description: 'Version of the representation; send it back in If-None-Match or If-Match', schema: { type: 'string' } },
  Location: { description: 'URL of the created resource', schema: { type: 'string' } },
  Link: { description: '`<next page>; rel="next"` while there is a next page', schema: { type: 'string' } },
  RetryAfter: { description: 'Seconds to wait before trying again', schema: { type: 'integer' } },
  RateLimitPolicy: { description: 'The rate limit that applies (IETF httpapi draft): `"default";q=<requests>;w=<seconds>`', schema: { type: 'string' } },
  RateLimit: { description: 'What is left of it: `"default";r=<remaining>;t=<seconds until the window resets>`', schema: { type: 'string' } },
  RequestId: {
    description: 'The request\'s id: the `X-Request-Id` sent, when it is 1–128 of `A-Z a-z 0-9 . _ : -`, otherwise the service\'s own. ' +
      'Problem bodies repeat it as `request_id`, and the events the request caused carry it: quote it when reporting a problem',
    schema: { type: 'string', pattern: TAKEN_AS_SENT.source }
  },
  IdempotentReplayed: {
    description: '`true` when this is the answer kept for an earlier request with the same Idempotency-Key and body: nothing was done again',
    schema: { type: 'string', enum: ['true'] }
  },
  WWWAuthenticate: {
    description: '`Bearer realm="api"`; with `error="insufficient_scope"` when the caller is authenticated but not allowed (do not refresh the token)',
    schema: { type: 'string' }
  }
}

const header = (name: string) => ({ $ref: `#/components/headers/${name}` })

/** Resources answered with their version's ETag (and, when created, their Location) by every write. */
const VERSIONED = new Set(['#/components/schemas/User', '#/components/schemas/Email'])

/**
 * No parameter carries an example a documentation page would put in its "try it" field: an id in the path (user 42
 * is somebody else, or nobody), a header (an ETag of another resource; one Idempotency-Key shared by every reader,
 * whose second POST is 422 IDEMPOTENCY_KEY_REUSED), a paging cursor (an example is no valid cursor) or a query
 * filter (`?id=1&id=5&email=ada@example.com` lists nobody the reader knows). Their descriptions say what goes there.
 */
function withoutExamples(parameter: Parameter): void {
  delete parameter.example
  delete parameter.examples
  const schema = parameter.schema
  // OpenAPI 3.1's schema types leave `examples` off array schemas, though JSON Schema allows it on any.
  if (schema && !('$ref' in schema)) for (const key of ['examples', 'example']) Reflect.deleteProperty(schema, key)
}

/** Header parameters as HTTP writes them (route schemas must name them in lower case). */
const HEADER_NAMES: Record<string, string> = { 'if-match': 'If-Match', 'idempotency-key': 'Idempotency-Key' }

/** The request id the example problems carry (one a client sent, as a mobile app's trace id might be). */
const EXAMPLE_REQUEST_ID = 'ios-7f3a9c2e:42'

/** The example body of each error status: what a client most often meets there. */
const EXAMPLES: Record<number, [string, string, string]> = {
  400: ['Bad Request', 'VALIDATION_FAILED', 'body /email must match format "email"'],
  401: ['Unauthorized', 'UNAUTHENTICATED', 'A valid bearer token is required'],
  403: ['Forbidden', 'FORBIDDEN', 'The caller may not access this resource'],
  404: ['Not Found', 'USER_NOT_FOUND', 'No user has id 42'],
  409: ['Conflict', 'EMAIL_TAKEN', 'The address ada@example.com belongs to a user already'],
  412: ['Precondition Failed', 'PRECONDITION_FAILED', 'If-Match does not name the current version of the resource'],
  413: ['Payload Too Large', 'PAYLOAD_TOO_LARGE', 'The request body is too large'],
  415: ['Unsupported Media Type', 'UNSUPPORTED_MEDIA_TYPE', 'Send JSON, a urlencoded form or multipart/form-data'],
  422: ['Unprocessable Entity', 'IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with another request: use a new key for a new request'],
  429: ['Too Many Requests', 'RATE_LIMITED', 'Too many requests: at most 1200 per 60 s'],
  500: ['Internal Server Error', 'INTERNAL', 'An unexpected error occurred'],
  503: ['Service Unavailable', 'UNAVAILABLE', 'The service is temporarily unavailable']
}
const PROBLEM = { $ref: '#/components/schemas/Problem' }

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const

const SUCCESS: Record<number, string> = { 200: 'OK', 201: 'Created', 204: 'No content' }

export interface DocumentOptions {
  /** FORBIDDEN_STATUS: with 403, refusals of authenticated callers are documented as 403 beside the 401. */
  forbiddenStatus: 401 | 403
}

/** Every operation of the document, with its method. */
function operationsOf(doc: Document): Array<[typeof METHODS[number], Operation]> {
  const found: Array<[typeof METHODS[number], Operation]> = []
  for (const item of Object.values(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item?.[method]
      if (op) found.push([method, op])
    }
  }
  return found
}

/** Whether a generated document is the OpenAPI 3.1 document the app asks for (it always is: checked, not assumed). */
export function isOpenApi31(doc: Partial<{ openapi: string }>): doc is Document {
  return typeof doc.openapi === 'string' && doc.openapi.startsWith('3.1.') && 'paths' in doc
}

export function completeDocument(doc: Document, options: DocumentOptions = { forbiddenStatus: 401 }): Document {
  const components = (doc.components ??= {})
  components.headers = { ...HEADERS, ...(components.headers ?? {}) }
  for (const [method, op] of operationsOf(doc)) {
    const responses = (op.responses ??= {})
    const unauthorized = responses['401']
    if (options.forbiddenStatus === 403 && unauthorized && !isReference(unauthorized) && op.security === undefined) {
      responses['401'] = { ...unauthorized, description: 'Not authenticated (UNAUTHENTICATED)' }
      responses['403'] = { ...copy(unauthorized), description: 'Authenticated but not allowed (FORBIDDEN and route-specific codes)' }
    }
    const limited = Boolean(responses['429'])
    const idempotent = (op.parameters ?? []).some((p) => !isReference(p) && p.in === 'header' && p.name.toLowerCase() === 'idempotency-key')
    // Anything may fail unexpectedly: INTERNAL, with no detail of why.
    responses['500'] ??= { description: 'Unexpected error (INTERNAL): nothing of its cause is told', content: { 'application/problem+json': { schema: PROBLEM } } }
    for (const [status, response] of Object.entries(responses)) {
      if (isReference(response)) continue
      completeResponse(method, Number(status), response, limited, idempotent)
    }
    for (const parameter of op.parameters ?? []) {
      if (isReference(parameter)) continue
      const spelled = parameter.in === 'header' ? HEADER_NAMES[parameter.name] : undefined
      if (spelled) parameter.name = spelled
      withoutExamples(parameter)
      // A parameter whose schema is a named component (a status) loses its own description on the way here:
      // it says which component it takes, and what that component says.
      const named = /^#\/components\/schemas\/(\w+)$/.exec(refOf(parameter.schema))?.[1]
      if (named && !parameter.description) {
        const about = components.schemas?.[named]?.description
        parameter.description = about ? `A ${named}: ${about}` : `A ${named}`
      }
    }
    const ok = responses['200']
    const okRef = ok && !isReference(ok) ? refOf(ok.content?.['application/json']?.schema) : ''
    if (method === 'get' && /Collection$/.test(okRef)) {
      // Machine-readable paging, for generators that build iterators: the page size and cursor parameters, and
      // where the items and the next page's link are in the answer.
      const cursorParam = (op.parameters ?? []).some((p) => !isReference(p) && p.in === 'query' && p.name === 'after') ? 'after' : 'cursor'
      op['x-pagination'] = { style: 'cursor', limitParam: 'limit', cursorParam, itemsField: 'items', nextField: 'next', nextHeader: 'Link' }
    }
    if (method === 'get' && ok) {
      responses['304'] = { description: 'Not modified: If-None-Match names the current ETag', headers: { ETag: header('ETag'), 'X-Request-Id': header('RequestId') } }
      op.parameters = [...(op.parameters ?? []), {
        name: 'If-None-Match', in: 'header', required: false, schema: { type: 'string' },
        description: 'Answer 304 without a body when the ETag still matches'
      }]
    }
  }
  shareComponents(doc)
  return doc
}

/** One answer of an operation: its description, the headers it carries, the example of its problem. */
function completeResponse(method: string, code: number, response: Response, limited: boolean, idempotent: boolean): void {
  const success = SUCCESS[code]
  if (response.description === 'Default Response' && success) response.description = success
  const headers: NonNullable<Response['headers']> = { ...(response.headers ?? {}), 'X-Request-Id': header('RequestId') }
  if (idempotent && code >= 200 && code < 300) headers['Idempotent-Replayed'] = header('IdempotentReplayed')
  const ref = refOf(response.content?.['application/json']?.schema)
  if ((code === 200 && method === 'get') || ((code === 200 || code === 201) && VERSIONED.has(ref))) headers.ETag = header('ETag')
  if (code === 201 && VERSIONED.has(ref)) headers.Location = header('Location')
  const problem = response.content?.['application/problem+json']
  const example = EXAMPLES[code]
  if (problem && example) problem.example = { type: 'about:blank', title: example[0], status: code, code: example[1], detail: example[2], request_id: EXAMPLE_REQUEST_ID }
  if (code === 200 && method === 'get' && /Collection$/.test(ref)) headers.Link = header('Link')
  if (code === 401 || code === 403) headers['WWW-Authenticate'] = header('WWWAuthenticate')
  if (limited) {
    headers['RateLimit-Policy'] = header('RateLimitPolicy')
    headers.RateLimit = header('RateLimit')
  }
  if (code === 429 || code === 503) headers['Retry-After'] = header('RetryAfter')
  response.headers = headers
}

/** Parameters that recur across operations, by `in:name`, and the component each becomes. */
const SHARED_PARAMETERS: Record<string, string> = {
  'path:user_id': 'UserId', 'path:email_id': 'EmailId', 'path:session_id': 'SessionId',
  'query:limit': 'Limit', 'query:cursor': 'Cursor',
  'header:If-Match': 'IfMatch', 'header:If-None-Match': 'IfNoneMatch', 'header:Idempotency-Key': 'IdempotencyKey'
}

/** Responses that mean the same wherever they occur, by status, and the component each becomes. */
const SHARED_RESPONSES: Record<string, string> = {
  304: 'NotModified', 412: 'PreconditionFailed', 413: 'PayloadTooLarge', 415: 'UnsupportedMediaType',
  422: 'IdempotencyKeyReused', 429: 'RateLimited', 500: 'Internal', 503: 'Unavailable'
}

/**
 * Moves what recurs into `components.parameters` and `components.responses`, referenced where it was: a generator
 * then makes one type of each, and the document says once what a 412 or a `user_id` is. Of the forms one parameter
 * or status takes, the commonest is shared; another form (a health check's 503, which is never rate limited) stays
 * where it is.
 */
function shareComponents(doc: Document): void {
  const operations = operationsOf(doc).map(([, op]) => op)
  const components = (doc.components ??= {})
  const commonest = (forms: string[]) => {
    const counts = new Map<string, number>()
    for (const form of forms) counts.set(form, (counts.get(form) ?? 0) + 1)
    return [...counts].sort((a, b) => b[1] - a[1])[0]
  }

  const parameters = (components.parameters ??= {})
  for (const [key, name] of Object.entries(SHARED_PARAMETERS)) {
    const forms = operations.flatMap((op) => (op.parameters ?? [])
      .filter((p): p is Parameter => !isReference(p) && `${p.in}:${p.name}` === key).map((p) => JSON.stringify(p)))
    const shared = commonest(forms)
    if (!shared || shared[1] < 2) continue
    const form = shared[0]
    parameters[name] = copy(operations.flatMap((op) => op.parameters ?? []).find((p) => JSON.stringify(p) === form)!)
    for (const op of operations) {
      op.parameters = (op.parameters ?? []).map((p) => (JSON.stringify(p) === form ? { $ref: `#/components/parameters/${name}` } : p))
    }
  }

  const responses = (components.responses ??= {})
  for (const [status, name] of Object.entries(SHARED_RESPONSES)) {
    const forms = operations.flatMap((op) => (op.responses?.[status] ? [JSON.stringify(op.responses[status])] : []))
    const shared = commonest(forms)
    if (!shared || shared[1] < 2) continue
    const form = shared[0]
    for (const op of operations) {
      const response = op.responses?.[status]
      if (!op.responses || !response || JSON.stringify(response) !== form) continue
      responses[name] ??= copy(response)
      op.responses[status] = { $ref: `#/components/responses/${name}` }
    }
  }
}

const DELIVERY_HEADERS: Record<string, string> = {
  'webhook-id': 'The event\'s id: the same on every retry; de-duplicate on it',
  'webhook-timestamp': 'When this attempt was signed, in seconds since the epoch',
  'webhook-signature': '`v1,<base64 HMAC-SHA256>`, one per live secret, space-separated (Standard Webhooks)'
}

/**
 * The `webhooks` section (OpenAPI 3.1): each event type as a request Roster makes to a webhook, its body the event
 * type's own schema, so that SDK generators make a typed event of each.
 */
export function withWebhooks(doc: Document): Document {
  doc.webhooks = Object.fromEntries(EVENT_TYPES.map((type) => [type, {
    post: {
      operationId: `on${typedEventName(type)}`, tags: ['webhooks'], summary: `A ${type} event, pushed to a webhook subscribed to it`,
      parameters: Object.entries(DELIVERY_HEADERS).map(([name, description]) => ({ name, in: 'header' as const, required: true, description, schema: { type: 'string' as const } })),
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${typedEventName(type)}` } } } },
      responses: { '200': { description: 'Any 2xx answer within WEBHOOK_TIMEOUT_MS: delivered. Anything else, or no answer, is retried.' } }
    }
  }]))
  return doc
}
