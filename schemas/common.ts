import { Type } from '@sinclair/typebox'

export const MAX_ID = Number.MAX_SAFE_INTEGER

/** A row identifier: a positive integer every client language reads exactly. */
export const Id = Type.Integer({ minimum: 1, maximum: MAX_ID, format: 'int64', description: 'Positive integer, at most 2^53-1', examples: [42] })

export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339 UTC timestamp' })

export const Href = Type.String({ description: 'Link to the resource itself (root-relative, or absolute with PUBLIC_URL)' })

/** An e-mail address as a client sends it: compared case-insensitively, stored as given. */
export const Address = Type.String({ format: 'email', minLength: 3, maxLength: 254 })

/**
 * A name: at least one visible character, and no control characters (NUL, newlines, escapes) nor invisible ones that
 * only serve to spoof (zero-width space, word joiner, byte-order mark, bidirectional overrides). Joiners that scripts
 * and emoji need (U+200C, U+200D) are allowed.
 */
export const Name = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^(?=[\\s\\S]*\\S)[^\\p{Cc}\\u200B\\u2060\\uFEFF\\u202A-\\u202E\\u2066-\\u2069]*$',
  description: 'At least one visible character; no control or invisible formatting characters'
})

export const Password = Type.String({ minLength: 8, maxLength: 256 })

export const UserParams = Type.Object({ user_id: Id }, { additionalProperties: false })

/** Items per page when `limit` is not given. */
export const PAGE_SIZE = 50

/** The page size of a collection: optional (SDKs call a list without it), filled with its default before handlers run. */
export const Limit = Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: PAGE_SIZE, description: 'Items per page' }))

/** The cursor of the page after, as given in `next`. */
export const Cursor = Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'Opaque: copy it from the `next` link of the page before' }))

/** The query of a collection without filters of its own: a page size and the cursor of the page after. */
export const PageQuery = Type.Object({ limit: Limit, cursor: Cursor }, { additionalProperties: false })
export const EmailParams = Type.Object({ user_id: Id, email_id: Id }, { additionalProperties: false })
