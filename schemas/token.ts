import { Type, type Static } from '@sinclair/typebox'
import { Timestamp } from './common.js'
import { ref } from './ref.js'
import { User } from './user.js'

export const Credentials = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 256 })
  },
  { $id: 'Credentials', additionalProperties: false }
)
export type Credentials = Static<typeof Credentials>

export const Token = Type.Object(
  {
    token: Type.String({ description: 'Opaque bearer token' }),
    token_type: Type.Literal('Bearer'),
    expires_at: Timestamp,
    user: ref(User)
  },
  { $id: 'Token', additionalProperties: false }
)
export type Token = Static<typeof Token>
