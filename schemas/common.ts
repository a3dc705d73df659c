import { Type } from '@sinclair/typebox'

export const MAX_ID = Number.MAX_SAFE_INTEGER

/** A row identifier: a positive integer every client language reads exactly. */
export const Id = Type.Integer({ minimum: 1, maximum: MAX_ID, description: 'Positive integer, at most 2^53-1' })

export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339 UTC timestamp' })

export const Href = Type.String({ description: 'Link to the resource itself (root-relative, or absolute with PUBLIC_URL)' })

/** An e-mail address as a client sends it: compared case-insensitively, stored as given. */
export const Address = Type.String({ format: 'email', minLength: 3, maxLength: 254 })

export const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' })

export const Password = Type.String({ minLength: 8, maxLength: 256 })

export const UserParams = Type.Object({ user_id: Id }, { additionalProperties: false })
export const EmailParams = Type.Object({ user_id: Id, email_id: Id }, { additionalProperties: false })
