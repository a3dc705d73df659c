import { Type, type Static } from '@sinclair/typebox'
import { Email } from './email.js'
import { Event } from './event.js'
import { Metadata } from './metadata.js'
import { ref } from './ref.js'
import { Session } from './session.js'
import { User } from './user.js'

/** GET /users/{user_id}/export: everything held about a user, as the caller may read it. */
export const UserData = Type.Object(
  {
    user: ref(User),
    emails: Type.Array(ref(Email), { description: 'Every address of the user, with its verified mark' }),
    sessions: Type.Array(ref(Session), { description: 'Its live sessions' }),
    metadata: ref(Metadata),
    events: Type.Array(ref(Event), { description: 'Every event about the user still kept (EVENT_RETENTION_SECONDS), oldest first' })
  },
  { $id: 'UserData', description: 'Everything Roster holds about a user, for the user itself or an admin: `private` metadata only to admins' }
)
export type UserData = Static<typeof UserData>
