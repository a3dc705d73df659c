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
  { $id: 'Session', description: 'A login and the tokens it was given; ending it ends them all', examples: [{'id': 9, 'href': '/users/42/sessions/9', 'created_at': '2026-11-21T10:00:00.000Z', 'last_used_at': '2026-11-21T10:00:00.000Z', 'expires_at': '2026-12-21T10:00:00.000Z', 'client': 'RosterApp/3.2 (iOS 19)', 'current': true}] }
)
export type Session = Static<typeof Session>

export const SessionCollection = Type.Object(
  {
    href: Href,
    items: Type.Array(ref(Session)),
    next: Type.Union([Type.String(), Type.Null()], { description: 'Link to the next page, null on the last' })
  },
  { $id: 'SessionCollection', description: 'A page of sessions', examples: [{'href': '/users/42/sessions?limit=50', 'items': [{'id': 9, 'href': '/users/42/sessions/9', 'created_at': '2026-11-21T10:00:00.000Z', 'last_used_at': '2026-11-21T10:00:00.000Z', 'expires_at': '2026-12-21T10:00:00.000Z', 'client': 'RosterApp/3.2 (iOS 19)', 'current': true}], 'next': null}] }
)
