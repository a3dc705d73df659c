import type { ErrorCode, FieldError } from '../../schemas/problem.js'

/**
 * The errors of Roster's rules, thrown by services, repositories and the HTTP machinery alike. They say what went
 * wrong in the contract's terms (a code and a detail) and nothing about HTTP: `src/http/problems.ts` (the catalogue of answers) alone turns
 * each kind into a status, headers and a problem+json body.
 */
export class DomainError extends Error {
  constructor(readonly code: ErrorCode, detail: string) {
    super(detail)
    this.name = new.target.name
  }
}

/** The request itself is wrong: a field, a filter, a cursor, a body that cannot be read. */
export class InvalidInput extends DomainError {
  constructor(detail: string, readonly errors: FieldError[] = [], code: 'VALIDATION_FAILED' | 'INVALID_FILTER' | 'INVALID_CURSOR' | 'INVALID_TOKEN' | 'INVALID_WEBHOOK_URL' | 'UNSUPPORTED_HASH' | 'METADATA_TOO_LARGE' = 'VALIDATION_FAILED') {
    super(code, detail)
  }
}

/** No such resource (or route). Seen only by callers allowed to see the resource. */
export class NotFound extends DomainError {}

/** The path exists, but not with this method. */
export class MethodNotAllowed extends DomainError {
  constructor(method: string, readonly allowed: string[]) {
    super('METHOD_NOT_ALLOWED', `${method} is not served here; allowed: ${allowed.join(', ')}`)
  }
}

/** The change contradicts the current state of other resources. */
export class Conflict extends DomainError {}

export class EmailTaken extends Conflict {
  constructor(address: string) {
    super('EMAIL_TAKEN', `The address ${address} belongs to a user already`)
  }
}

/** Another user has this id of the directory it came from (users.external_id is unique). */
export class ExternalIdTaken extends Conflict {
  constructor(externalId: string) {
    super('EXTERNAL_ID_TAKEN', `The externalId ${externalId} belongs to another user already`)
  }
}

export class EmailLimit extends Conflict {
  constructor(max: number) {
    super('EMAIL_LIMIT', `A user may have at most ${max} addresses`)
  }
}

export class LastAdmin extends Conflict {
  constructor() {
    super('LAST_ADMIN', 'The last active admin cannot be demoted, banned or deleted: make another admin first')
  }
}

export class DeletionNotScheduled extends Conflict {
  constructor() {
    super('DELETION_NOT_SCHEDULED', 'No deletion of this user is scheduled: there is nothing to restore')
  }
}

export class EmailAlreadyVerified extends Conflict {
  constructor() {
    super('EMAIL_ALREADY_VERIFIED', 'This address is verified already')
  }
}

export class EmailUnverified extends Conflict {
  constructor() {
    super('EMAIL_UNVERIFIED', 'Only a verified address may become primary: confirm the verification mail first')
  }
}

/** A mailed token that is unknown, used, expired or dead with its address: which of these is not said. */
export class InvalidToken extends InvalidInput {
  constructor() {
    super('The token is invalid, used or expired', [{ path: '/token', in: 'body', message: 'is invalid, used or expired' }], 'INVALID_TOKEN')
  }
}

/** A password hash in none of the forms Roster keeps and checks (or too costly to check): an import fails its line. */
export class UnsupportedHash extends InvalidInput {
  constructor(detail: string) {
    super(`Unsupported password hash: ${detail}`, [], 'UNSUPPORTED_HASH')
  }
}

/** A part of a user's metadata past METADATA_MAX_BYTES or nested deeper than allowed. */
export class MetadataTooLarge extends InvalidInput {
  constructor(path: string, message: string) {
    super(`${path.slice(1)} ${message}`, [{ path, in: 'body', message }], 'METADATA_TOO_LARGE')
  }
}

/** A retry's Idempotency-Key names a request that is still being served. */
export class IdempotencyKeyInUse extends Conflict {
  constructor() {
    super('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still being served; retry once it has answered')
  }
}

/** Well-formed, but not to be done: the same Idempotency-Key with another request. */
export class Unprocessable extends DomainError {}

export class IdempotencyKeyReused extends Unprocessable {
  constructor() {
    super('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with another request: use a new key for a new request')
  }
}

/** The resource is no longer at the version the client named (If-Match). */
export class VersionConflict extends DomainError {
  constructor() {
    super('PRECONDITION_FAILED', 'If-Match does not name the current version of the resource')
  }
}

/** Who the caller is could not be established: other credentials might change the answer. */
export class Unauthenticated extends DomainError {
  constructor(
    detail = 'A valid bearer token is required',
    code: 'UNAUTHENTICATED' | 'INVALID_CREDENTIALS' | 'USER_BANNED' | 'INVALID_GRANT' | 'REFRESH_TOKEN_REUSED' | 'REAUTH_REQUIRED' = 'UNAUTHENTICATED'
  ) {
    super(code, detail)
  }
}

/** A banned user's sign-in: when the ban has an end, its answer says when (never why). */
export class Banned extends Unauthenticated {
  constructor(readonly until: number | null) {
    super('This user is banned', 'USER_BANNED')
  }
}

/**
 * The caller is known, but signed in too long ago for what it asks (deleting itself): a fresh sign-in, by password or
 * e-mail code, within `maxAgeSeconds` would do (RFC 9470's `insufficient_user_authentication`).
 */
export class ReauthRequired extends Unauthenticated {
  constructor(readonly maxAgeSeconds: number) {
    super(`Sign in again (by password or e-mail code): this needs a session signed in less than ${maxAgeSeconds} s ago`, 'REAUTH_REQUIRED')
  }
}

/** The caller is known and may not do this: no new token would change the answer. */
export class Forbidden extends DomainError {
  constructor(detail = 'The caller may not access this resource', code: ErrorCode = 'FORBIDDEN') {
    super(code, detail)
  }
}

/** Version 1's rule: a user may not be left without an address while REQUIRE_EMAIL holds (a refusal, not a conflict). */
export class EmailRequired extends Forbidden {
  constructor() {
    super('A user must keep at least one address', 'EMAIL_REQUIRED')
  }
}

/** Too many requests or attempts; the caller may try again after `retryAfterSeconds`. */
export class RateLimited extends DomainError {
  readonly retryAfterSeconds: number
  constructor(detail: string, retryAfterMs: number) {
    super('RATE_LIMITED', detail)
    this.retryAfterSeconds = Math.max(1, Math.ceil(retryAfterMs / 1000))
  }
}

/** The service cannot answer now (database down, overloaded); the same request may succeed later. */
export class Unavailable extends DomainError {
  constructor(detail = 'The service is temporarily unavailable', readonly retryAfterSeconds = 5) {
    super('UNAVAILABLE', detail)
  }
}

/** The request's body did not arrive in time. */
export class RequestTimeout extends DomainError {
  constructor(detail = 'The request body took too long to arrive') {
    super('REQUEST_TIMEOUT', detail)
  }
}

export class PayloadTooLarge extends DomainError {
  constructor(detail = 'The request body is too large') {
    super('PAYLOAD_TOO_LARGE', detail)
  }
}

export class UnsupportedMediaType extends DomainError {
  constructor(detail = 'Send JSON, a urlencoded form or multipart/form-data') {
    super('UNSUPPORTED_MEDIA_TYPE', detail)
  }
}

export const userNotFound = (what: string) => new NotFound('USER_NOT_FOUND', `No user has ${what}`)
export const emailNotFound = (detail: string) => new NotFound('EMAIL_NOT_FOUND', detail)
export const scimTokenNotFound = (id: number) => new NotFound('SCIM_TOKEN_NOT_FOUND', `No SCIM token has id ${id}`)
export const importNotFound = (id: number) => new NotFound('IMPORT_NOT_FOUND', `No import has id ${id}`)
export const invalidField = (path: string, where: NonNullable<FieldError['in']>, message: string, detail = `${path.slice(1)} ${message}`) =>
  new InvalidInput(detail, [{ path, in: where, message }])

/**
 * A setting that cannot work, found while the service starts (a port in use, a file that cannot be made or read):
 * its message is the one line the start prints (src/server.ts), naming the setting and what to do.
 */
export class StartupError extends Error {
  constructor(message: string, options?: { cause: unknown }) {
    super(message, options)
    this.name = new.target.name
  }
}
