import type { Static, TObject } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { PAGE_SIZE, UserParams } from '../../schemas/common.js'
import { ref } from '../../schemas/ref.js'
import { EmailParam, NameValue, NewUser, PasswordChange, RoleValue, StatusValue, User, UserCollection, UserQuery } from '../../schemas/user.js'
import { InvalidInput } from '../common/errors.js'
import { callerOf, causeOf, mailingClient } from '../auth/steps.js'
import { withMultipart } from '../http/bodies.js'
import { ifMatchVersions } from '../http/etag.js'
import { acceptRawBodies, BARE_VALUE_NOTE, KEY_PATH_BODY_LIMIT, keyPathBody } from '../http/key-path.js'
import { parseFilter, rosterUserFilter } from '../filter/index.js'
import { collection, FORM_TYPES, IdempotencyKey, IfMatch, NoContent, problems, tagged, type ProblemStatus } from '../http/responses.js'
import { presentUser } from '../accounts/present.js'
import type { UserRow } from '../accounts/users.js'
import type { NameFilter } from './repository.js'
import type { UserChange } from './service.js'
import metadataRoutes from './metadata-routes.js'

/** `ada`, `ada*`, `*ada`, `*ada*`; a `*` anywhere else, or nothing around the stars, is INVALID_FILTER. */
export function parseNameFilter(raw: string): NameFilter {
  const m = /^(\*?)([^*]+)(\*?)$/.exec(raw)
  if (!m) {
    throw new InvalidInput('name takes a fragment with an optional * at its start, its end, or both',
      [{ path: '/name', in: 'query', message: 'a * may only open or close the fragment' }], 'INVALID_FILTER')
  }
  const [, lead, text, trail] = m as unknown as [string, string, string, string]
  const mode = lead && trail ? 'contains' : lead ? 'suffix' : trail ? 'prefix' : 'exact'
  return { mode, text }
}

const tags = ['users']

/** A user's answer with its ETag: one whose ban has ended shows lifted before the lift writes it, and is tagged so. */
function taggedUser(reply: FastifyReply, row: UserRow, base: string): User {
  const user = presentUser(row, base)
  return tagged(reply, row.version, user, user.status !== row.status)
}

const users: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.users

  app.get('/users', {
    config: { auth: 'caller' },
    schema: {
      operationId: 'listUsers', tags, summary: 'List and filter users',
      description: 'Filters combine with AND. A plain user sees at most itself. Ordered by id, paged by an opaque cursor.',
      querystring: UserQuery,
      response: { 200: ref(UserCollection), ...problems([400, 'VALIDATION_FAILED', 'INVALID_FILTER', 'INVALID_CURSOR'], 401) }
    }
  }, async (request, reply) => {
    const q = request.query
    const caller = callerOf(request)
    const ids = q.id ? [...new Set(q.id)].sort((a, b) => a - b) : undefined
    const condition = q.filter === undefined ? undefined : rosterUserFilter(parseFilter(q.filter), { engine: app.dialect, admin: caller.role === 'admin' })
    const filters = { ids, email: q.email, name: q.name === undefined ? undefined : parseNameFilter(q.name), status: q.status, condition }
    // A cursor is valid only for the filters, and the caller's scope, it was made for.
    const scope = JSON.stringify(['users', ids, q.email, q.name, q.status, q.filter, service.listingScope(caller)])
    const after = q.cursor === undefined ? 0 : app.cursors.decode(q.cursor, scope)
    const params: Array<[string, string]> = []
    for (const id of ids ?? []) params.push(['id', String(id)])
    if (q.email !== undefined) params.push(['email', q.email])
    if (q.name !== undefined) params.push(['name', q.name])
    if (q.status !== undefined) params.push(['status', q.status])
    if (q.filter !== undefined) params.push(['filter', q.filter])
    const limit = q.limit ?? PAGE_SIZE
    params.push(['limit', String(limit)])
    return collection(reply, {
      base, path: '/users', params, limit, cursor: q.cursor,
      rows: await service.list(caller, filters, after, limit),
      nextCursor: (last) => app.cursors.encode(last.id, scope),
      present: (row) => presentUser(row, base)
    })
  })

  app.get('/users/:user_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'getUser', tags, summary: 'Read a user',
      description: 'The user with its primary address. A plain user may read only itself; another id is 401 FORBIDDEN whether or not it exists.',
      params: UserParams,
      response: { 200: ref(User), ...problems(400, 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const row = await service.get(callerOf(request), request.params.user_id)
    return taggedUser(reply, row, base)
  })

  app.get('/users/email/:email', {
    config: { auth: 'caller' },
    schema: {
      operationId: 'getUserByEmail', tags, summary: 'Find a user by any of its addresses',
      description: 'Case-insensitive. A plain user may look up only itself; any other answer is 401, whether or not the address exists.',
      params: EmailParam,
      response: { 200: ref(User), ...problems(400, 401, [404, 'USER_NOT_FOUND']) }
    }
  }, async (request, reply) => {
    const row = await service.findByAddress(callerOf(request), request.params.email)
    return taggedUser(reply, row, base)
  })

  await app.register(withMultipart(userWrites))
  await app.register(metadataRoutes)
}

/** Sign-up, deletion and the key paths: the routes that take a body. */
const userWrites: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.users

  app.post('/users', {
    config: { auth: 'public', idempotent: true },
    schema: {
      operationId: 'createUser', tags, consumes: FORM_TYPES, summary: 'Create a user',
      description: 'Open to anyone while SIGNUP_OPEN is true, else to admins. `role` and `status` may only be set by an admin. A verification mail is sent to the address.',
      headers: IdempotencyKey, body: ref(NewUser),
      response: { 201: ref(User), ...problems(400, 401, [409, 'EMAIL_TAKEN', 'IDEMPOTENCY_KEY_IN_USE'], 413, 415, 422, 429) }
    }
  }, async (request, reply) => {
    const row = await service.signUp(request.caller, request.body, mailingClient(request), causeOf(request))
    const user = taggedUser(reply, row, base)
    return reply.code(201).header('location', user.href).send(user)
  })

  app.delete('/users/:user_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'deleteUser', tags, summary: 'Delete a user with its addresses and tokens',
      description: 'Removes the user, its addresses, sessions, tokens and metadata in one transaction, and forgets it: its events are erased (`erased: true`), its pending mail dropped. ' +
        'With ACCOUNT_DELETION_GRACE_SECONDS above 0, schedules the deletion instead (202): the user\'s sessions end at once, it can no longer sign in, and an admin may restore it until `deletion_scheduled_at`. 409 LAST_ADMIN for the last active admin.',
      params: UserParams, headers: IfMatch,
      response: { 202: ref(User), 204: NoContent, ...problems(400, 401, [404, 'USER_NOT_FOUND'], [409, 'LAST_ADMIN'], 412) }
    }
  }, async (request, reply) => {
    const scheduled = await service.remove(callerOf(request), request.params.user_id, ifMatchVersions(request.headers['if-match']), causeOf(request))
    if (scheduled) return reply.code(202).send(taggedUser(reply, scheduled, base))
    return reply.code(204).send(null)
  })

  app.post('/users/:user_id/restore', {
    config: { auth: 'admin' },
    schema: {
      operationId: 'restoreUser', tags, summary: 'Take back a scheduled deletion (admin)',
      description: 'Until its `deletion_scheduled_at`, a user whose deletion is scheduled may be restored: it signs in again as before (its ended sessions stay ended). 409 DELETION_NOT_SCHEDULED when none is; after it, 404: the deletion is final.',
      params: UserParams, headers: IfMatch,
      response: { 200: ref(User), ...problems(400, 401, 403, [404, 'USER_NOT_FOUND'], [409, 'DELETION_NOT_SCHEDULED'], 412) }
    }
  }, async (request, reply) => {
    const row = await service.restore(request.params.user_id, ifMatchVersions(request.headers['if-match']), causeOf(request))
    return taggedUser(reply, row, base)
  })

  await app.register(userKeyPaths)
}

/** The user's key paths: PUT a value at /users/{user_id}/<field>, in any encoding, bare values included. */
const userKeyPaths: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  const service = app.services.users
  await acceptRawBodies(app)

  /** One key path of the user: its named body schema (the value under `key`, in any encoding) and the change it makes. */
  const keyPath = <S extends TObject>(
    key: string, body: S, auth: 'self-or-admin' | 'admin', operationId: string, summary: string,
    change: (body: Static<S>) => UserChange, conflicts: ProblemStatus[] = []
  ) => {
    app.put(`/users/:user_id/${key}`, {
      config: { auth },
      bodyLimit: KEY_PATH_BODY_LIMIT,
      preValidation: keyPathBody(key),
      schema: {
        operationId, tags, summary, consumes: FORM_TYPES, description: BARE_VALUE_NOTE,
        params: UserParams, headers: IfMatch, body: ref(body),
        response: { 200: ref(User), ...problems(400, 401, [404, 'USER_NOT_FOUND'], ...conflicts, 412, 413) }
      }
    }, async (request, reply) => {
      const row = await service.change(request.params.user_id, change(request.body as Static<S>), ifMatchVersions(request.headers['if-match']), causeOf(request))
      return taggedUser(reply, row, base)
    })
  }
  keyPath('name', NameValue, 'self-or-admin', 'setUserName', 'Rename a user', ({ name }) => ({ name }))
  keyPath('status', StatusValue, 'admin', 'setUserStatus', 'Ban or reinstate a user (admin)', ({ status, reason, until }) => ({ status, reason, until }), [[409, 'LAST_ADMIN']])
  keyPath('role', RoleValue, 'admin', 'setUserRole', 'Change the role of a user (admin)', ({ role }) => ({ role }), [[409, 'LAST_ADMIN']])

  app.put('/users/:user_id/password', {
    config: { auth: 'self-or-admin' },
    bodyLimit: KEY_PATH_BODY_LIMIT,
    preValidation: keyPathBody('password'),
    schema: {
      operationId: 'setUserPassword', tags, summary: 'Change a password', consumes: FORM_TYPES,
      description: 'A user changing its own password sends `current_password`; an admin changing another user\'s does not. Every other token of the user is revoked.',
      params: UserParams, headers: IfMatch, body: ref(PasswordChange),
      response: { 204: NoContent, ...problems(400, [401, 'UNAUTHENTICATED', 'FORBIDDEN', 'INVALID_CREDENTIALS'], [404, 'USER_NOT_FOUND'], 412, 413) }
    }
  }, async (request, reply) => {
    const { password, current_password: current } = request.body
    await service.changePassword(callerOf(request), request.params.user_id, password, current, ifMatchVersions(request.headers['if-match']), request.client, causeOf(request))
    return reply.code(204).send(null)
  })
}

export default users
