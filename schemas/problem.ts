import { Type, type Static } from '@sinclair/typebox'
import { stringEnum } from './ref.js'

const ERROR_CODES = [
  'VALIDATION_FAILED', 'INVALID_FILTER', 'INVALID_CURSOR', 'INVALID_TOKEN', 'INVALID_WEBHOOK_URL', 'UNSUPPORTED_HASH', 'METADATA_TOO_LARGE', 'BAD_REQUEST', 'HEADERS_TOO_LARGE', 'REQUEST_TIMEOUT',
  'UNAUTHENTICATED', 'FORBIDDEN', 'INVALID_CREDENTIALS', 'USER_BANNED', 'EMAIL_REQUIRED',
  'INVALID_GRANT', 'REFRESH_TOKEN_REUSED', 'REAUTH_REQUIRED',
  'NOT_FOUND', 'METHOD_NOT_ALLOWED', 'USER_NOT_FOUND', 'EMAIL_NOT_FOUND', 'SESSION_NOT_FOUND', 'WEBHOOK_NOT_FOUND', 'DELIVERY_NOT_FOUND', 'IMPORT_NOT_FOUND', 'SCIM_TOKEN_NOT_FOUND',
  'EMAIL_TAKEN', 'EXTERNAL_ID_TAKEN', 'EMAIL_LIMIT', 'LAST_ADMIN', 'DELETION_NOT_SCHEDULED', 'EMAIL_ALREADY_VERIFIED', 'EMAIL_UNVERIFIED',
  'IDEMPOTENCY_KEY_IN_USE', 'IDEMPOTENCY_KEY_REUSED',
  'PRECONDITION_FAILED', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'RATE_LIMITED',
  'INTERNAL', 'UNAVAILABLE'
] as const

/** Every machine-readable error code of the contract, as a string enum SDKs can switch on. */
export const ErrorCode = stringEnum(ERROR_CODES, { $id: 'ErrorCode', description: 'Machine-readable error code' })
export type ErrorCode = Static<typeof ErrorCode>

/** Which part of the request a field error is in: a named enum, so generators make a type of it, not an inline one. */
export const FieldLocation = stringEnum(['body', 'query', 'path', 'header'] as const, { $id: 'FieldLocation', description: 'The part of the request' })

export const FieldError = Type.Object(
  {
    path: Type.String({ description: 'JSON pointer to the offending value within `in`' }),
    in: Type.Optional(Type.Unsafe<Static<typeof FieldLocation>>({ $ref: 'FieldLocation' })),
    message: Type.String()
  },
  { $id: 'FieldError', description: 'One invalid value: where it is and what is wrong with it' }
)
export type FieldError = Static<typeof FieldError>

/** RFC 9457 problem details, with the contract's `code`. */
export const Problem = Type.Object(
  {
    type: Type.String({ default: 'about:blank' }),
    title: Type.String(),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    code: Type.Unsafe<ErrorCode>({ $ref: 'ErrorCode' }),
    detail: Type.Optional(Type.String()),
    errors: Type.Optional(Type.Array(Type.Unsafe<FieldError>({ $ref: 'FieldError' }))),
    banned_until: Type.Optional(Type.String({ format: 'date-time', description: 'USER_BANNED: when the ban ends by itself, if it has an end' })),
    request_id: Type.String({ description: 'The request\'s id, as its `X-Request-Id` answer header says: quote it when reporting a problem' })
  },
  {
    $id: 'Problem', description: 'RFC 9457 problem details; switch on `code`',
    examples: [{
      type: 'about:blank', title: 'Not Found', status: 404, code: 'USER_NOT_FOUND', detail: 'No user has id 42',
      request_id: 'ios-7f3a9c2e:42'
    }]
  }
)
export type Problem = Static<typeof Problem>
