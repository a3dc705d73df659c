import { Type, type Static } from '@sinclair/typebox'
import { Href, Id, Timestamp } from './common.js'
import { ref } from './ref.js'

export const Session = Type.Object(
  {
    id: Id,
    href: Href,
    created_at: Timestamp,
    last_used_at: Type.String({ format: 'date-time', description: 'The login or the last refresh' }),
    expires_at: Type.String({ format: 'date-time', description: 'When the session ends unless refreshed before' }),
    client: Type.String({ description: 'The User-Agent of the login, at most 200 characters' }),
    current: Type.Boolean({ description: 'The session of the token this request was made with' })
  },
  { $id: 'Session', additionalProperties: false, description: 'A login and the tokens it was given; ending it ends them all' }
)
export type Session = Static<typeof Session>

export const SessionCollection = Type.Object(
  {
    href: Href,
    items: Type.Array(ref(Session)),
    next: Type.Union([Type.String(), Type.Null()], { description: 'Link to the next page, null on the last' })
  },
  { $id: 'SessionCollection', additionalProperties: false }
)
