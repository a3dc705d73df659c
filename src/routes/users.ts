import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { Name, Password, UserParams } from '../../schemas/common.js'
import { ref } from '../../schemas/ref.js'
import { EmailParam, NewUser, User, UserCollection, UserQuery, UserRole, UserStatus } from '../../schemas/user.js'
import { ApiError, forbidden, refused, unauthenticated, userNotFound, validationFailed } from '../lib/errors.js'
import { ifMatchVersions } from '../lib/etag.js'
import { acceptRawBodies, KEY_PATH_BODY_LIMIT, keyPathBody } from '../lib/keypath.js'
import { presentUser } from '../lib/present.js'
import { hashPassword, verifyPassword } from '../lib/secrets.js'
import {
  createUser, deleteUser, findPasswordHash, findUserByAddress, findUserById, listUsers, updateUser,
  type NameFilter, type UserChanges, type UserFilters
} from '../repositories/users.js'
import { withMultipart } from '../plugins/bodies.js'
import { collection, FORM_TYPES, IfMatch, KEY_PATH_TYPES, NoContent, problems, tagged } from './responses.js'

/** `ada`, `ada*`, `*ada`, `*ada*`; a `*` anywhere else, or nothing around the stars, is INVALID_FILTER. */
export function parseNameFilter(raw: string): NameFilter {
  const m = /^(\*?)([^*]+)(\*?)$/.exec(raw)
  if (!m) {
    throw new ApiError(400, 'INVALID_FILTER', 'name takes a fragment with an optional * at its start, its end, or both', {
      errors: [{ path: '/name', in: 'query', message: 'a * may only open or close the fragment' }]
    })
  }
  const [, lead, text, trail] = m as unknown as [string, string, string, string]
  const mode = lead && trail ? 'contains' : lead ? 'suffix' : trail ? 'prefix' : 'exact'
  return { mode, text }
}

/** Refuses a caller who is not an admin: UNAUTHENTICATED without a token, FORBIDDEN with one. */
function requireAdmin(request: FastifyRequest, why: string): void {
  if (request.caller?.role === 'admin') return
  throw request.caller ? forbidden(why) : unauthenticated(why)
}

const tags = ['users']

const users: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''

  app.get('/users', {
    config: { auth: 'caller' },
    schema: {
      operationId: 'listUsers', tags, summary: 'List and filter users',
      description: 'Filters combine with AND. A plain user sees at most itself. Ordered by id, paged by an opaque cursor.',
      querystring: UserQuery,
      response: { 200: ref(UserCollection), ...problems(400, 401) }
    }
  }, async (request, reply) => {
    const q = request.query
    const caller = request.caller!
    const ids = q.id ? [...new Set(q.id)].sort((a, b) => a - b) : undefined
    const filters: UserFilters = {
      ids,
      email: q.email,
      name: q.name === undefined ? undefined : parseNameFilter(q.name),
      status: q.status,
      onlyId: caller.role === 'admin' ? undefined : caller.id
    }
    const scope = JSON.stringify(['users', ids, q.email, q.name, q.status, filters.onlyId])
    const after = q.cursor === undefined ? 0 : app.cursors.decode(q.cursor, scope)
    const params: Array<[string, string]> = []
    for (const id of ids ?? []) params.push(['id', String(id)])
    if (q.email !== undefined) params.push(['email', q.email])
    if (q.name !== undefined) params.push(['name', q.name])
    if (q.status !== undefined) params.push(['status', q.status])
    params.push(['limit', String(q.limit)])
    return collection(reply, {
      base, path: '/users', params, limit: q.limit, cursor: q.cursor,
      rows: await listUsers(app.db, filters, after, q.limit),
      nextCursor: (id) => app.cursors.encode(id, scope),
      present: (row) => presentUser(row, base)
    })
  })

  app.get('/users/:user_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'getUser', tags, summary: 'Read a user',
      params: UserParams,
      response: { 200: ref(User), ...problems(400, 401, 404) }
    }
  }, async (request, reply) => {
    const id = request.params.user_id
    const caller = request.caller!
    // The caller's own row came with its token: reading oneself costs no further query.
    const row = caller.id === id ? caller : await findUserById(app.db, id)
    if (!row) throw userNotFound(`id ${id}`)
    return tagged(reply, row.version, presentUser(row, base))
  })

  app.get('/users/email/:email', {
    config: { auth: 'caller' },
    schema: {
      operationId: 'getUserByEmail', tags, summary: 'Find a user by any of its addresses',
      description: 'Case-insensitive. A plain user may look up only itself; any other answer is 401, whether or not the address exists.',
      params: EmailParam,
      response: { 200: ref(User), ...problems(400, 401, 404) }
    }
  }, async (request, reply) => {
    const caller = request.caller!
    const row = await findUserByAddress(app.db, request.params.email)
    if (caller.role !== 'admin' && row?.id !== caller.id) throw forbidden()
    if (!row) throw userNotFound(`the address ${request.params.email}`)
    return tagged(reply, row.version, presentUser(row, base))
  })

  await app.register(withMultipart(userWrites))
}

/** Sign-up, deletion and the key paths: the routes that take a body. */
const userWrites: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''

  app.post('/users', {
    config: { auth: 'public' },
    schema: {
      operationId: 'createUser', tags, consumes: FORM_TYPES, summary: 'Create a user',
      description: 'Open to anyone while SIGNUP_OPEN is true, else to admins. `role` and `status` may only be set by an admin.',
      body: ref(NewUser),
      response: { 201: ref(User), ...problems(400, 401, 409, 413, 415, 429) }
    }
  }, async (request, reply) => {
    const body = request.body
    if (!app.config.SIGNUP_OPEN) requireAdmin(request, 'Sign-up is closed: only an admin may create users')
    if (body.role !== undefined || body.status !== undefined) requireAdmin(request, 'Only an admin may set role or status')
    const row = await createUser(app.db, {
      name: body.name.trim(),
      email: body.email,
      passwordHash: await hashPassword(body.password),
      role: body.role ?? 'user',
      status: body.status ?? 'ACTIVE'
    })
    const user = presentUser(row, base)
    return reply.code(201).header('location', user.href).send(tagged(reply, row.version, user))
  })

  app.delete('/users/:user_id', {
    config: { auth: 'self-or-admin' },
    schema: {
      operationId: 'deleteUser', tags, summary: 'Delete a user with its addresses and tokens',
      params: UserParams, headers: IfMatch,
      response: { 204: NoContent, ...problems(400, 401, 404, 412) }
    }
  }, async (request, reply) => {
    await deleteUser(app.db, request.params.user_id, ifMatchVersions(request.headers['if-match']))
    return reply.code(204).send(null)
  })

  await app.register(userKeyPaths)
}

/** The user's key paths: PUT a value at /users/{user_id}/<field>, in any encoding, bare values included. */
const userKeyPaths: FastifyPluginAsyncTypebox = async (app) => {
  const base = app.config.PUBLIC_URL ?? ''
  await acceptRawBodies(app)

  const fields = [
    { key: 'name', value: Name, auth: 'self-or-admin', operationId: 'setUserName', summary: 'Rename a user' },
    { key: 'status', value: ref(UserStatus), auth: 'admin', operationId: 'setUserStatus', summary: 'Ban or reinstate a user (admin)' },
    { key: 'role', value: ref(UserRole), auth: 'admin', operationId: 'setUserRole', summary: 'Change the role of a user (admin)' }
  ] as const

  for (const field of fields) {
    const body = keyPathBody(field.key, field.value)
    app.put(`/users/:user_id/${field.key}`, {
      config: { auth: field.auth },
      bodyLimit: KEY_PATH_BODY_LIMIT,
      preValidation: body.preValidation,
      schema: {
        operationId: field.operationId, tags, summary: field.summary, consumes: KEY_PATH_TYPES,
        params: UserParams, headers: IfMatch, body: body.schema,
        response: { 200: ref(User), ...problems(400, 401, 404, 412, 413) }
      }
    }, async (request, reply) => {
      const value = (request.body as Record<string, string>)[field.key]!
      const changes = { [field.key]: field.key === 'name' ? value.trim() : value } as UserChanges
      const row = await updateUser(app.db, request.params.user_id, changes, ifMatchVersions(request.headers['if-match']))
      return tagged(reply, row.version, presentUser(row, base))
    })
  }

  const password = keyPathBody('password', Password, { current_password: Type.Optional(Type.String({ maxLength: 256 })) })
  app.put('/users/:user_id/password', {
    config: { auth: 'self-or-admin' },
    bodyLimit: KEY_PATH_BODY_LIMIT,
    preValidation: password.preValidation,
    schema: {
      operationId: 'setUserPassword', tags, summary: 'Change a password', consumes: FORM_TYPES,
      description: 'A user changing its own password sends `current_password`; an admin changing another user\'s does not. Every other token of the user is revoked.',
      params: UserParams, headers: IfMatch, body: password.schema,
      response: { 204: NoContent, ...problems(400, 401, 404, 412, 413) }
    }
  }, async (request, reply) => {
    const id = request.params.user_id
    const caller = request.caller!
    const self = caller.id === id
    if (self) {
      const current = request.body.current_password
      if (current === undefined) {
        throw validationFailed('current_password is required to change your own password', [
          { path: '/current_password', in: 'body', message: 'is required to change your own password' }
        ])
      }
      const stored = await findPasswordHash(app.db, id)
      if (!(await verifyPassword(stored?.password_hash, current))) {
        throw refused('INVALID_CREDENTIALS', 'current_password is wrong')
      }
    }
    const passwordHash = await hashPassword(request.body.password)
    await updateUser(app.db, id, { passwordHash }, ifMatchVersions(request.headers['if-match']), self ? caller.tokenHash : undefined)
    return reply.code(204).send(null)
  })
}

export default users
