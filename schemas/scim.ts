import { Type, type Static } from '@sinclair/typebox'
import { Href, Id, Timestamp } from './common.js'

// SCIM 2.0 (RFC 7643, RFC 7644) as Roster serves it under /scim/v2, and the SCIM tokens that open it.

/** Where SCIM is served. */
export const SCIM_BASE = '/scim/v2'
export const SCIM_USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User'
export const SCIM_ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error'
export const SCIM_LIST_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse'
export const SCIM_PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp'

/** The most users one SCIM list answers (ServiceProviderConfig's filter.maxResults). */
export const SCIM_MAX_RESULTS = 200

export const NewScimToken = Type.Object(
  { description: Type.String({ minLength: 1, maxLength: 200, description: 'What the token is for: the identity provider and the app in it' }) },
  { $id: 'NewScimToken', additionalProperties: false, description: 'A SCIM token to make', examples: [{ description: 'Okta, production' }] }
)

const scimTokenFields = {
  id: Id,
  href: Href,
  description: Type.String(),
  created_at: Timestamp,
  last_used_at: Type.Union([Timestamp, Type.Null()], { description: 'When an identity provider last used it (to the minute); null if never' })
}

export const ScimToken = Type.Object(scimTokenFields, {
  $id: 'ScimToken', description: 'A SCIM token, without its secret: it is shown once, when made',
  examples: [{ id: 3, href: '/scim-tokens/3', description: 'Okta, production', created_at: '2026-11-21T10:00:00.000Z', last_used_at: null }]
})
export type ScimToken = Static<typeof ScimToken>

export const ScimTokenWithSecret = Type.Object({ ...scimTokenFields, token: Type.String({ description: 'The bearer token for /scim/v2: shown this once, only its hash is kept' }) }, {
  $id: 'ScimTokenWithSecret', description: 'A SCIM token just made, with its secret (shown this once)',
  examples: [{ id: 3, href: '/scim-tokens/3', description: 'Okta, production', token: 'x5E1t0O9o1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r', created_at: '2026-11-21T10:00:00.000Z', last_used_at: null }]
})

export const ScimTokenCollection = Type.Object(
  {
    href: Href,
    items: Type.Array(Type.Unsafe<ScimToken>(Type.Ref('ScimToken'))),
    next: Type.Union([Type.String(), Type.Null()], { description: 'Link to the next page, null on the last' })
  },
  { $id: 'ScimTokenCollection', description: 'A page of SCIM tokens, newest first' }
)

export const ScimTokenParams = Type.Object({ token_id: Id }, { additionalProperties: false })

/** A SCIM resource or message: SCIM's own JSON, open to the attributes and extensions identity providers send. */
const open = (id: string, description: string, examples?: unknown[]) =>
  Type.Object({ schemas: Type.Optional(Type.Array(Type.String(), { description: 'The schema URNs of the body' })) }, {
    $id: id, additionalProperties: true, description, ...(examples ? { examples } : {})
  })

export const ScimUser = open('ScimUser', 'A SCIM User (RFC 7643 §4.1): id, externalId, userName (the primary address), name, displayName, emails, active, meta', [{
  schemas: [SCIM_USER_SCHEMA], id: '42', externalId: '00u1ab2cd3EF4gh5', userName: 'ada@example.com',
  name: { formatted: 'Ada Lovelace', givenName: 'Ada', familyName: 'Lovelace' }, displayName: 'Ada Lovelace',
  emails: [{ value: 'ada@example.com', type: 'work', primary: true }], active: true,
  meta: { resourceType: 'User', created: '2026-11-21T10:00:00.000Z', lastModified: '2026-11-21T10:00:00.000Z', location: '/scim/v2/Users/42', version: 'W/"v1.57p"' }
}])
export const ScimUserInput = open('ScimUserInput', 'A SCIM User to create or to replace with: userName (an address) is required; `password` is accepted, never returned')
export const ScimPatch = open('ScimPatch', 'A SCIM PatchOp (RFC 7644 §3.5.2): `Operations`, each `op` (add, replace, remove, in any case), an optional `path` and a `value`', [{
  schemas: [SCIM_PATCH_SCHEMA], Operations: [{ op: 'replace', value: { active: false } }]
}])
export const ScimListResponse = open('ScimListResponse', 'A SCIM ListResponse: totalResults, startIndex (from 1), itemsPerPage, Resources')
export const ScimError = Type.Object({
  schemas: Type.Array(Type.String()),
  status: Type.String({ description: 'The HTTP status, as a string' }),
  scimType: Type.Optional(Type.String({ description: 'uniqueness, invalidFilter, invalidValue, invalidSyntax, noTarget, mutability, …' })),
  detail: Type.Optional(Type.String())
}, {
  $id: 'ScimError', additionalProperties: true, description: 'A SCIM error (RFC 7644 §3.12)',
  examples: [{ schemas: [SCIM_ERROR_SCHEMA], status: '409', scimType: 'uniqueness', detail: 'The address ada@example.com belongs to a user already' }]
})
export const ScimDiscovery = open('ScimDiscovery', 'What the service provider supports: ServiceProviderConfig, or a ListResponse of ResourceTypes or Schemas')

export const ScimDiscoveryParams = Type.Object({ id: Type.String({ maxLength: 200, description: 'The resource type\'s or the schema\'s id' }) }, { additionalProperties: false })
export const ScimUserParams = Type.Object({ id: Type.String({ maxLength: 40, description: 'The user\'s id, as SCIM gives it (a string of digits)' }) }, { additionalProperties: false })

export const ScimListQuery = Type.Object({
  filter: Type.Optional(Type.String({ maxLength: 2000, description: 'A SCIM filter, as `userName eq "ada@example.com"`' })),
  startIndex: Type.Optional(Type.Integer({ description: 'The first result, from 1 (below 1 is taken as 1)' })),
  count: Type.Optional(Type.Integer({ description: `At most this many results (at most ${SCIM_MAX_RESULTS}; below 0 is taken as 0)` })),
  attributes: Type.Optional(Type.String({ maxLength: 1000, description: 'Only these attributes (comma-separated), with id' })),
  excludedAttributes: Type.Optional(Type.String({ maxLength: 1000, description: 'Not these attributes (comma-separated)' }))
})

export const ScimUserQuery = Type.Object({
  attributes: ScimListQuery.properties.attributes,
  excludedAttributes: ScimListQuery.properties.excludedAttributes
})

export const ScimIfMatch = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'Write only if the user is still at this version (meta.version, its ETag): else 412' }))
})

export const scimSchemas = [
  NewScimToken, ScimToken, ScimTokenWithSecret, ScimTokenCollection, ScimUser, ScimUserInput, ScimPatch, ScimListResponse, ScimError, ScimDiscovery
]
