import { Session, SessionCollection } from './session.js'
import { Token, TokenRequest } from './token.js'
import { Email, EmailCollection, NewEmail } from './email.js'
import { ErrorCode, FieldError, Problem } from './problem.js'
import { NewUser, User, UserCollection, UserRole, UserStatus } from './user.js'

/** Every shared schema, registered once with `app.addSchema` and named by its `$id` in the OpenAPI components. */
export const sharedSchemas = [
  ErrorCode, FieldError, Problem,
  UserStatus, UserRole, User, UserCollection, NewUser,
  Email, EmailCollection, NewEmail,
  Session, SessionCollection, TokenRequest, Token
]
