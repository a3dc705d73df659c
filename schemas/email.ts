import { Type, type Static } from '@sinclair/typebox'
import { Address, Href, Id, Timestamp } from './common.js'
import { ref } from './ref.js'

export const Email = Type.Object(
  {
    id: Id,
    href: Href,
    address: Type.String(),
    primary: Type.Boolean(),
    created_at: Timestamp
  },
  { $id: 'Email', additionalProperties: false }
)
export type Email = Static<typeof Email>

export const EmailCollection = Type.Object(
  {
    href: Href,
    items: Type.Array(ref(Email)),
    next: Type.Union([Type.String(), Type.Null()])
  },
  { $id: 'EmailCollection', additionalProperties: false }
)
export type EmailCollection = Static<typeof EmailCollection>

export const NewEmail = Type.Object({ address: Address }, { $id: 'NewEmail', additionalProperties: false })
export type NewEmail = Static<typeof NewEmail>
