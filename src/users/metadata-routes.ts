import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { UserParams } from '../../schemas/common.js'
import { Metadata, MetadataPatch, MetadataReplacement } from '../../schemas/metadata.js'
import { ref } from '../../schemas/ref.js'
import { callerOf, causeOf } from '../auth/steps.js'
import { acceptJson } from '../http/bodies.js'
import { ifMatchVersions } from '../http/etag.js'
import { IfMatch, problems, tagged } from '../http/responses.js'

const tags = ['users']
const MERGE_PATCH = 'application/merge-patch+json'

const WHO = 'Who writes what: `public` and `private` admins only (a plain user naming either is refused, 401 FORBIDDEN, and nothing changes); `unsafe` the user and admins.'
const LIMITS = 'Each part is a JSON object of at most METADATA_MAX_BYTES bytes as compact JSON, nested at most 10 deep (400 METADATA_TOO_LARGE). A change writes `user.metadata_changed` with the changed keys\' former values.'

/** GET, PATCH (RFC 7396) and PUT of /users/{user_id}/metadata: a resource of its own beside the User. */
const metadata: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.metadata
  // Merge patches are JSON (RFC 7396), read as the app reads JSON.
  acceptJson(app, MERGE_PATCH)
  // Three full parts, each written with JSON's escapes (`\u00e9` for é: up to three times its compact bytes), fit:
  // BODY_LIMIT alone would refuse a write the limits of the parts allow.
  const bodyLimit = Math.max(app.config.BODY_LIMIT, 3 * 3 * app.config.METADATA_MAX_BYTES + 1024)

  app.get('/users/:user_id/metadata', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'getUserMetadata', tags, summary: 'Read a user\'s metadata',
      description: 'The three parts of the user\'s metadata, with the ETag of its version. `private` is shown to admins only; a user reads its `public` and `unsafe` parts.',
      params: UserParams,
      response: { 200: ref(Metadata), ...problems(400, 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const read = await service.get(callerOf(request), request.params.user_id)
    return tagged(reply, read.version, read.metadata(base))
  })

  app.patch('/users/:user_id/metadata', {
    config: { auth: 'self-or-admin' },
    bodyLimit,
    schema: {
      operationId: 'patchUserMetadata', tags, summary: 'Change a user\'s metadata by a merge patch',
      description: `A JSON merge patch (RFC 7396, \`${MERGE_PATCH}\`; \`application/json\` is read the same way): each part named is merged key by key, deep, a key set to null is removed, a part left out is untouched; a part set to null is emptied. ${WHO} ${LIMITS}`,
      consumes: [MERGE_PATCH, 'application/json'],
      params: UserParams, headers: IfMatch, body: ref(MetadataPatch),
      response: { 200: ref(Metadata), ...problems([400, 'VALIDATION_FAILED', 'METADATA_TOO_LARGE'], 401, [404, 'USER_NOT_FOUND'], 412, 413, 415) }
    }
  }, async (request, reply) => {
    const caller = callerOf(request)
    const written = await service.patch(caller, request.params.user_id, request.body, ifMatchVersions(request.headers['if-match']), causeOf(request))
    return tagged(reply, written.version, written.metadata(base))
  })

  app.put('/users/:user_id/metadata', {
    config: { auth: 'self-or-admin' },
    bodyLimit,
    schema: {
      operationId: 'replaceUserMetadata', tags, summary: 'Replace parts of a user\'s metadata',
      description: `Each part named is replaced whole; a part left out is untouched. ${WHO} ${LIMITS}`,
      consumes: ['application/json'],
      params: UserParams, headers: IfMatch, body: ref(MetadataReplacement),
      response: { 200: ref(Metadata), ...problems([400, 'VALIDATION_FAILED', 'METADATA_TOO_LARGE'], 401, [404, 'USER_NOT_FOUND'], 412, 413, 415) }
    }
  }, async (request, reply) => {
    const caller = callerOf(request)
    const written = await service.replace(caller, request.params.user_id, request.body, ifMatchVersions(request.headers['if-match']), causeOf(request))
    return tagged(reply, written.version, written.metadata(base))
  })
}

export default metadata
