import { Type, type Static } from '@sinclair/typebox'
import { Timestamp } from './common.js'
import { ref, stringEnum } from './ref.js'
import { Session } from './session.js'
import { User } from './user.js'

export const GRANT_TYPES = ['password', 'refresh_token', 'email_code'] as const

/** A login (`grant_type=password`, the default: `email` and `password`) or a refresh (`refresh_token`). */
export const TokenRequest = Type.Object(
  {
    grant_type: Type.Optional(stringEnum(GRANT_TYPES, { description: '`password` (the default), `refresh_token`, or `email_code` (a code from POST /auth/email-codes)' })),
    email: Type.Optional(Type.String({ minLength: 1, maxLength: 254, description: 'With `password`: any address of the user; with `email_code`: the address the code was mailed to' })),
    code: Type.Optional(Type.String({ pattern: '^[0-9]{6}$', description: 'With `email_code`: the 6-digit code from the mail' })),
    password: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'With `password`' })),
    refresh_token: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'With `refresh_token`: the last one issued for the session' }))
  },
  { $id: 'TokenRequest', additionalProperties: false, description: 'A login (`grant_type=password`) or a refresh (`grant_type=refresh_token`)', examples: [{ grant_type: 'password', email: 'ada@example.com', password: 'correct-horse-battery' }, { grant_type: 'refresh_token', refresh_token: 'hV3pQ9xR2mT7wK4nB8cD1fG6jL0sA5eY_uI-oZ2vX3w' }] }
)
export type TokenRequest = Static<typeof TokenRequest>

export const Token = Type.Object(
  {
    token: Type.String({ description: 'Opaque bearer access token' }),
    token_type: Type.Literal('Bearer'),
    expires_in: Type.Integer({ minimum: 0, description: 'Seconds the access token lives' }),
    expires_at: Timestamp,
    refresh_token: Type.String({ description: 'Opaque, single use: exchange it for a new pair with grant_type=refresh_token' }),
    refresh_expires_at: Type.String({ format: 'date-time', description: 'When the refresh token, and the session unless refreshed, ends' }),
    session: ref(Session),
    user: ref(User)
  },
  { $id: 'Token', description: 'A session started or continued: an access token, a single-use refresh token', examples: [{'token': 'q3Jd8…', 'token_type': 'Bearer', 'expires_in': 900, 'expires_at': '2026-11-21T10:15:00.000Z', 'refresh_token': 'Zx81k…', 'refresh_expires_at': '2026-12-21T10:00:00.000Z', 'session': {'id': 9, 'href': '/users/42/sessions/9', 'created_at': '2026-11-21T10:00:00.000Z', 'last_used_at': '2026-11-21T10:00:00.000Z', 'expires_at': '2026-12-21T10:00:00.000Z', 'client': 'RosterApp/3.2 (iOS 19)', 'current': true}, 'user': {'id': 42, 'href': '/users/42', 'name': 'Ada Lovelace', 'email': 'ada@example.com', 'status': 'ACTIVE', 'role': 'user', 'created_at': '2026-11-21T10:00:00.000Z', 'updated_at': '2026-11-21T10:00:00.000Z'}}] }
)
export type Token = Static<typeof Token>
