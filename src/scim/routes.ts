import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { PageQuery } from '../../schemas/common.js'
import { ref } from '../../schemas/ref.js'
import {
  NewScimToken, SCIM_BASE, SCIM_LIST_SCHEMA, SCIM_MAX_RESULTS, SCIM_USER_SCHEMA, ScimDiscovery, ScimDiscoveryParams, ScimError, ScimIfMatch, ScimListQuery,
  ScimListResponse, ScimPatch, ScimTokenCollection, ScimTokenParams, ScimTokenWithSecret, ScimUser, ScimUserInput, ScimUserParams, ScimUserQuery
} from '../../schemas/scim.js'
import { callerOf } from '../auth/steps.js'
import { DomainError, NotFound, UnsupportedMediaType, userNotFound } from '../common/errors.js'
import type { Cause } from '../events/record.js'
import { acceptJson } from '../http/bodies.js'
import { toDomainError } from '../http/error-handler.js'
import { NoContent, pageUnder, problems } from '../http/responses.js'
import { scimAnswerTo, sendScimError } from '../http/scim-errors.js'
import { invalidSyntax } from './errors.js'
import { presentScimToken, presentScimUser, projection, scimPrecondition, type ScimUserJson } from './present.js'
import type { ScimService } from './service.js'

const SCIM_TYPE = 'application/scim+json'
const tokenTags = ['scim-tokens']
const tags = ['scim']

/** SCIM's answers are SCIM's JSON, in `application/scim+json`. */
const scimBody = (schema: ReturnType<typeof ref>, description: string) => ({ description, content: { [SCIM_TYPE]: { schema } } })

const WHY: Record<number, string> = {
  400: 'Invalid request (scimType invalidValue, invalidSyntax, invalidFilter, invalidPath, noTarget or mutability)',
  401: 'No valid SCIM token nor admin\'s token',
  404: 'No such user or resource (USER_NOT_FOUND, NOT_FOUND)',
  409: 'Conflict: scimType uniqueness for an address or externalId another user has; or the last admin (EMAIL_TAKEN, EXTERNAL_ID_TAKEN, LAST_ADMIN)',
  412: 'If-Match does not name the user\'s current version',
  413: 'Request body too large',
  415: 'Unsupported Content-Type: send application/scim+json or application/json',
  429: 'Too many requests',
  500: 'Unexpected error: nothing of its cause is told',
  503: 'Temporarily unavailable'
}

/** A SCIM operation's error answers, each SCIM's error body; every operation may be rate limited or unavailable. */
function scimErrors(...statuses: number[]) {
  return Object.fromEntries([...statuses, 429, 500, 503].map((s) => [s, scimBody(ref(ScimError), WHY[s]!)]))
}

/** The id of a SCIM path: Roster's ids are digits; anything else names no user. */
function userId(raw: string): number {
  if (!/^[1-9][0-9]{0,15}$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw userNotFound(`id ${raw}`)
  return Number(raw)
}

/** Changes through /scim/v2 are the directory's (`scim`, by its token), or the admin's whose token was used. */
function scimCause(request: FastifyRequest): Cause {
  const base = request.server.config.PUBLIC_URL ?? ''
  const recorded = () => { request.wroteEvents = true }
  const token = request.scimToken
  const actor = token ? { type: 'scim' as const, id: token.id } : { type: 'admin' as const, id: callerOf(request).id }
  return { actor, requestId: request.id, base, recorded }
}

/** A SCIM answer; a User's with its version as the ETag (`shown`, before `attributes` may narrow `body`). */
function send(reply: FastifyReply, status: number, body: unknown, shown?: ScimUserJson): FastifyReply {
  if (shown !== undefined) reply.header('etag', shown.meta.version)
  return reply.code(status).type(SCIM_TYPE).serializer(JSON.stringify).send(body)
}

const SERVICE_PROVIDER_CONFIG = {
  schemas: ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'],
  documentationUri: 'https://github.com/roster/roster/blob/main/docs/SCIM.md',
  patch: { supported: true },
  bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
  filter: { supported: true, maxResults: SCIM_MAX_RESULTS },
  changePassword: { supported: false },
  sort: { supported: false },
  etag: { supported: true },
  authenticationSchemes: [{
    type: 'oauthbearertoken', name: 'Bearer token', primary: true,
    description: 'A SCIM token made by an admin with POST /scim-tokens (or an admin\'s access token), as Authorization: Bearer'
  }],
  meta: { resourceType: 'ServiceProviderConfig', location: `${SCIM_BASE}/ServiceProviderConfig` }
}

const USER_RESOURCE_TYPE = {
  schemas: ['urn:ietf:params:scim:schemas:core:2.0:ResourceType'],
  id: 'User', name: 'User', endpoint: '/Users', description: 'A user of Roster', schema: SCIM_USER_SCHEMA, schemaExtensions: [],
  meta: { resourceType: 'ResourceType', location: `${SCIM_BASE}/ResourceTypes/User` }
}

const attribute = (name: string, type: string, extra: Record<string, unknown> = {}) => ({
  name, type, multiValued: false, required: false, caseExact: false, mutability: 'readWrite', returned: 'default', uniqueness: 'none', ...extra
})

const USER_SCHEMA = {
  schemas: ['urn:ietf:params:scim:schemas:core:2.0:Schema'],
  id: SCIM_USER_SCHEMA, name: 'User', description: 'A user of Roster: its primary address is its userName',
  attributes: [
    attribute('userName', 'string', { required: true, uniqueness: 'server', description: 'The primary e-mail address' }),
    attribute('externalId', 'string', { caseExact: true, uniqueness: 'server' }),
    attribute('name', 'complex', {
      subAttributes: [attribute('formatted', 'string'), attribute('givenName', 'string'), attribute('familyName', 'string')]
    }),
    attribute('displayName', 'string'),
    attribute('emails', 'complex', {
      multiValued: true,
      subAttributes: [attribute('value', 'string'), attribute('type', 'string', { canonicalValues: ['work'] }), attribute('primary', 'boolean')]
    }),
    attribute('active', 'boolean', { description: 'false bans the user (reason deprovisioned) and ends its sessions' }),
    attribute('password', 'string', { mutability: 'writeOnly', returned: 'never' })
  ],
  meta: { resourceType: 'Schema', location: `${SCIM_BASE}/Schemas/${SCIM_USER_SCHEMA}` }
}

const listOf = (resources: unknown[]) => ({
  schemas: [SCIM_LIST_SCHEMA], totalResults: resources.length, startIndex: 1, itemsPerPage: resources.length, Resources: resources
})

/** SCIM 2.0 under /scim/v2: discovery, and Users. Every answer and error is SCIM's, every change the API's. */
const scimRoutes = (service: ScimService): FastifyPluginAsyncTypebox => async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const options = { forbiddenStatus: app.config.FORBIDDEN_STATUS }
  const config = { auth: 'scim' as const }

  // SCIM's own media type is JSON, read as the app reads JSON (strict UTF-8, prototype poisoning refused); a form,
  // which the rest of the API takes, is no SCIM body.
  acceptJson(app, SCIM_TYPE)
  app.removeContentTypeParser('application/x-www-form-urlencoded')

  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const unreadable = !(err instanceof DomainError) && typeof err.code === 'string' && err.code.startsWith('FST_ERR_CTP_') && err.statusCode === 400
    const mapped = unreadable ? invalidSyntax(`The body is not JSON: ${err.message}`) : toDomainError(err)
    const domain = mapped instanceof UnsupportedMediaType ? new UnsupportedMediaType(`Send ${SCIM_TYPE} (or application/json)`) : mapped
    if (!domain) request.log.error({ err }, 'request failed')
    return sendScimError(reply, scimAnswerTo(domain, options))
  })
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!
    return sendScimError(reply, scimAnswerTo(new NotFound('NOT_FOUND', `No SCIM resource at ${path}: Roster serves Users, not Groups`), options))
  })

  app.get('/ServiceProviderConfig', {
    config,
    schema: {
      operationId: 'getScimServiceProviderConfig', tags, summary: 'What Roster\'s SCIM supports',
      description: 'PATCH, filters (up to 200 results), ETags; no bulk, no sort, no password change of SCIM\'s own.',
      response: { 200: scimBody(ref(ScimDiscovery), 'The ServiceProviderConfig'), ...scimErrors(401) }
    }
  }, async (_request, reply) => send(reply, 200, SERVICE_PROVIDER_CONFIG))

  app.get('/ResourceTypes', {
    config,
    schema: {
      operationId: 'listScimResourceTypes', tags, summary: 'The SCIM resource types served',
      description: 'User alone: there are no groups.',
      response: { 200: scimBody(ref(ScimDiscovery), 'A ListResponse of ResourceTypes'), ...scimErrors(401) }
    }
  }, async (_request, reply) => send(reply, 200, listOf([USER_RESOURCE_TYPE])))

  app.get('/Schemas', {
    config,
    schema: {
      operationId: 'listScimSchemas', tags, summary: 'The SCIM schemas served',
      description: 'The User schema, with the attributes Roster keeps.',
      response: { 200: scimBody(ref(ScimDiscovery), 'A ListResponse of Schemas'), ...scimErrors(401) }
    }
  }, async (_request, reply) => send(reply, 200, listOf([USER_SCHEMA])))

  // Each discovery resource at the location its meta names (RFC 7644 §4).
  const one = (what: string, resources: Array<{ id: string }>, operationId: string) => app.get(`/${what}/:id`, {
    config,
    schema: {
      operationId, tags, summary: `One of the ${what}, by its id`,
      description: `What the list at ${SCIM_BASE}/${what} holds under this id (its meta.location); any other id is a SCIM 404.`,
      params: ScimDiscoveryParams,
      response: { 200: scimBody(ref(ScimDiscovery), `The ${what.replace(/s$/, '')}`), ...scimErrors(401, 404) }
    }
  }, async (request, reply) => {
    const found = resources.find((r) => r.id === request.params.id)
    if (!found) throw new NotFound('NOT_FOUND', `No SCIM resource at ${SCIM_BASE}/${what}/${request.params.id}`)
    return send(reply, 200, found)
  })
  one('ResourceTypes', [USER_RESOURCE_TYPE], 'getScimResourceType')
  one('Schemas', [USER_SCHEMA], 'getScimSchema')

  app.get('/Users', {
    config,
    schema: {
      operationId: 'listScimUsers', tags, summary: 'List and filter users (SCIM)',
      description: 'A ListResponse in id order: `filter` in SCIM\'s syntax (`userName eq "ada@example.com"`), `startIndex` from 1, `count` up to 200.',
      querystring: ScimListQuery,
      response: { 200: scimBody(ref(ScimListResponse), 'A ListResponse of Users'), ...scimErrors(400, 401) }
    }
  }, async (request, reply) => {
    const q = request.query
    const page = await service.list(q.filter, q.startIndex ?? 1, q.count ?? SCIM_MAX_RESULTS)
    const narrow = projection(q.attributes, q.excludedAttributes)
    return send(reply, 200, {
      schemas: [SCIM_LIST_SCHEMA], totalResults: page.total, startIndex: page.startIndex, itemsPerPage: page.rows.length,
      Resources: page.rows.map((row) => narrow(presentScimUser(row, base)))
    })
  })

  app.post('/Users', {
    config,
    schema: {
      operationId: 'createScimUser', tags, summary: 'Create a user (SCIM)',
      description: 'userName is the primary address (verified, as every address from the directory); active false creates it banned (deprovisioned). A userName or externalId another user has is 409 uniqueness: a retry never makes a second user.',
      body: ref(ScimUserInput),
      response: { 201: scimBody(ref(ScimUser), 'The User created, with its ETag and Location'), ...scimErrors(400, 401, 409, 413, 415) }
    }
  }, async (request, reply) => {
    const row = await service.create(request.body, scimCause(request))
    const user = presentScimUser(row, base)
    reply.header('location', user.meta.location)
    return send(reply, 201, user, user)
  })

  app.get('/Users/:id', {
    config,
    schema: {
      operationId: 'getScimUser', tags, summary: 'Read a user (SCIM)',
      description: 'The User with its ETag (meta.version).', params: ScimUserParams, querystring: ScimUserQuery,
      response: { 200: scimBody(ref(ScimUser), 'The User'), ...scimErrors(400, 401, 404) }
    }
  }, async (request, reply) => {
    const row = await service.get(userId(request.params.id))
    const user = presentScimUser(row, base)
    return send(reply, 200, projection(request.query.attributes, request.query.excludedAttributes)(user), user)
  })

  app.put('/Users/:id', {
    config,
    schema: {
      operationId: 'replaceScimUser', tags, summary: 'Replace a user (SCIM)',
      description: 'The attributes given replace the user\'s (emails given: the user keeps exactly those addresses); each change writes the event the API writes for it. active false bans (deprovisioned) and ends the user\'s sessions; true lifts that ban.',
      params: ScimUserParams, headers: ScimIfMatch, body: ref(ScimUserInput),
      response: { 200: scimBody(ref(ScimUser), 'The User as replaced'), ...scimErrors(400, 401, 404, 409, 412, 413, 415) }
    }
  }, async (request, reply) => {
    const row = await service.replace(userId(request.params.id), request.body, scimPrecondition(request.headers['if-match']), scimCause(request))
    const user = presentScimUser(row, base)
    return send(reply, 200, user, user)
  })

  app.patch('/Users/:id', {
    config,
    schema: {
      operationId: 'patchScimUser', tags, summary: 'Change a user (SCIM PATCH)',
      description: 'add, replace and remove in any case, with or without a path, as Okta (`{"op":"replace","value":{"active":false}}`) and Entra ID (`"op":"Replace"`, `emails[type eq "work"].value`, `"active":"False"`) send them.',
      params: ScimUserParams, headers: ScimIfMatch, body: ref(ScimPatch),
      response: { 200: scimBody(ref(ScimUser), 'The User as changed'), ...scimErrors(400, 401, 404, 409, 412, 413, 415) }
    }
  }, async (request, reply) => {
    const row = await service.patch(userId(request.params.id), request.body, scimPrecondition(request.headers['if-match']), scimCause(request))
    const user = presentScimUser(row, base)
    return send(reply, 200, user, user)
  })

  app.delete('/Users/:id', {
    config,
    schema: {
      operationId: 'deleteScimUser', tags, summary: 'Delete a user (SCIM)',
      description: 'As DELETE /users/{user_id}, and at once whatever ACCOUNT_DELETION_GRACE_SECONDS: the user, its addresses and sessions go, and it is forgotten (user.deleted; its events erased).',
      params: ScimUserParams, headers: ScimIfMatch,
      response: { 204: NoContent, ...scimErrors(400, 401, 404, 409, 412) }
    }
  }, async (request, reply) => {
    await service.remove(userId(request.params.id), scimPrecondition(request.headers['if-match']), scimCause(request))
    return reply.code(204).send(null)
  })
}

/** The SCIM tokens admins make for identity providers. */
const tokenRoutes = (service: ScimService): FastifyPluginAsyncTypebox => async (app) => {
  const base = app.config.PUBLIC_URL ?? ''

  app.post('/scim-tokens', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'createScimToken', tags: tokenTags, summary: 'Make a SCIM token for an identity provider',
      description: 'The token opens /scim/v2 and nothing else. It is in this answer only: Roster keeps its SHA-256.',
      body: ref(NewScimToken),
      response: { 201: ref(ScimTokenWithSecret), ...problems(400, 401, 413, 415) }
    }
  }, async (request, reply) => {
    const row = await service.newToken(request.body.description, callerOf(request).id)
    const shown = { ...presentScimToken(row, base), token: row.token }
    return reply.code(201).header('location', shown.href).send(shown)
  })

  app.get('/scim-tokens', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'listScimTokens', tags: tokenTags, summary: 'List SCIM tokens, newest first',
      description: 'Each with its description and last use; never the token itself.', querystring: PageQuery,
      response: { 200: ref(ScimTokenCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_CURSOR'], 401) }
    }
  }, async (request, reply) => pageUnder(reply, {
    base, path: '/scim-tokens', scope: 'scim-tokens', query: request.query, cursors: app.cursors,
    fetch: (before, limit) => service.listTokens(before, limit + 1),
    present: (row) => presentScimToken(row, base)
  }))

  app.delete('/scim-tokens/:token_id', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'deleteScimToken', tags: tokenTags, summary: 'Revoke a SCIM token',
      description: 'The identity provider using it is refused (401) from its next request.', params: ScimTokenParams,
      response: { 204: NoContent, ...problems(400, 401, [404, 'SCIM_TOKEN_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    await service.deleteToken(request.params.token_id)
    return reply.code(204).send(null)
  })
}

/** Registers the SCIM tokens' routes and /scim/v2 over one service. */
export async function registerScim(app: FastifyInstance, service: ScimService): Promise<void> {
  await app.register(tokenRoutes(service))
  await app.register(scimRoutes(service), { prefix: SCIM_BASE })
}
