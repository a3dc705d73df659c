import { STATUS_CODES } from 'node:http'
import type { ErrorCode, Problem } from '../../schemas/problem.js'

type FieldError = NonNullable<Problem['errors']>[number]

/** An answer the contract names: rendered as problem+json by the errors plugin. */
export class ApiError extends Error {
  readonly statusCode: number
  readonly code: ErrorCode
  readonly errors: FieldError[] | undefined
  readonly headers: Record<string, string>

  constructor(statusCode: number, code: ErrorCode, detail: string, options: { errors?: FieldError[]; headers?: Record<string, string> } = {}) {
    super(detail)
    this.name = 'ApiError'
    this.statusCode = statusCode
    this.code = code
    this.errors = options.errors
    this.headers = options.headers ?? {}
  }

  toProblem(): Problem {
    const problem: Problem = {
      type: 'about:blank',
      title: STATUS_CODES[this.statusCode] ?? 'Error',
      status: this.statusCode,
      code: this.code,
      detail: this.message
    }
    if (this.errors) problem.errors = this.errors
    return problem
  }
}

const BEARER = 'Bearer realm="api"'

/** A 401 that a new token could answer (the seed's status for every refusal; RFC 6750 header). */
export const authenticationFailed = (code: ErrorCode, detail: string) =>
  new ApiError(401, code, detail, { headers: { 'www-authenticate': BEARER } })

/** A 401 that no new token would change: `insufficient_scope` tells an SDK not to refresh. */
export const refused = (code: ErrorCode, detail: string) =>
  new ApiError(401, code, detail, { headers: { 'www-authenticate': `${BEARER}, error="insufficient_scope"` } })

export const unauthenticated = (detail = 'A valid bearer token is required') => authenticationFailed('UNAUTHENTICATED', detail)

export const forbidden = (detail = 'The caller may not access this resource') => refused('FORBIDDEN', detail)

export const validationFailed = (detail: string, errors: FieldError[]) =>
  new ApiError(400, 'VALIDATION_FAILED', detail, { errors })

export const userNotFound = (what: string) => new ApiError(404, 'USER_NOT_FOUND', `No user has ${what}`)
export const emailNotFound = (detail: string) => new ApiError(404, 'EMAIL_NOT_FOUND', detail)
export const emailTaken = (address: string) => new ApiError(409, 'EMAIL_TAKEN', `The address ${address} belongs to a user already`)
export const preconditionFailed = () => new ApiError(412, 'PRECONDITION_FAILED', 'If-Match does not name the current version of the resource')
