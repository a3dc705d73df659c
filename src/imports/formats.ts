import { Ajv, type ErrorObject } from 'ajv'
import addFormats from 'ajv-formats'
import { Type, type TSchema } from '@sinclair/typebox'
import sjson from 'secure-json-parse'
import { Name } from '../../schemas/common.js'
import type { ImportFormat } from '../../db/types.js'
import { ImportFields, ImportLine } from '../../schemas/import.js'
import type { UserRole, UserStatus } from '../../schemas/user.js'
import { fromAuth0Custom, fromFirebase, parsePasswordHash } from '../accounts/password-hashes.js'
import { isAddress } from '../common/formats.js'
import { DomainError } from '../common/errors.js'
import { holdsNonFinite, jsonDepth } from '../common/json-depth.js'
import { METADATA_MAX_DEPTH } from '../accounts/metadata.js'
import { foldedKey, holdsLoneSurrogate } from '../common/text.js'

/** A user as a line of any format brings it: what an import creates, or sets on a user already here. */
export interface Incoming {
  externalId: string | null
  /** Null when the line gives none: a new user is then named after its primary address. */
  name: string | null
  /** Exactly one is primary. */
  emails: Array<{ address: string; verified: boolean; primary: boolean }>
  /** The stored form of its password hash (accounts/password-hashes.ts); null when the line gives none. */
  passwordHash: string | null
  status: UserStatus | null
  role: UserRole | null
  createdAt: number | null
  /** The parts the line gives (merged into the user's on an update); a part not given is left out. */
  metadata: Partial<Record<'public' | 'private' | 'unsafe', Record<string, unknown>>>
}

/** Why a line fails: a code of the import's error report, a detail, and what of the line could be read. */
export class LineError extends Error {
  constructor(readonly code: string, detail: string, readonly email: string | null = null, readonly externalId: string | null = null) {
    super(detail)
  }
}

/** Each part of a line's metadata within the limits the API sets (METADATA_MAX_BYTES), or METADATA_TOO_LARGE. */
function checkMetadata(parts: Incoming['metadata'], maxBytes: number, email: string | null, externalId: string | null): Incoming['metadata'] {
  const given: Incoming['metadata'] = {}
  for (const name of ['public', 'private', 'unsafe'] as const) {
    const part = parts[name]
    if (part === undefined) continue
    if (jsonDepth(part) > METADATA_MAX_DEPTH) throw new LineError('METADATA_TOO_LARGE', `/metadata/${name}: nests deeper than ${METADATA_MAX_DEPTH}`, email, externalId)
    if (holdsNonFinite(part)) throw new LineError('VALIDATION_FAILED', `/metadata/${name}: holds a number past what a double holds`, email, externalId)
    if (Buffer.byteLength(JSON.stringify(part)) > maxBytes) throw new LineError('METADATA_TOO_LARGE', `/metadata/${name}: is larger than ${maxBytes} bytes`, email, externalId)
    given[name] = part
  }
  return given
}

/** Firebase's hash parameters, as the import was given them. */
export interface FirebaseParameters {
  signerKey: string
  saltSeparator: string
  rounds: number
  memCost: number
}

const ajv = new Ajv({ allErrors: false, strict: false })
addFormats.default(ajv)
/** A compiled check that narrows nothing: a record is read as its own type once it passed. */
type Check = { (data: unknown): boolean; errors?: ErrorObject[] | null }
const compile = (schema: TSchema): Check => ajv.compile(schema)

const validRoster = compile(ImportLine)
const validFields = compile(ImportFields)

/** Why multipart fields do not make an import's parameters, or undefined when they do. */
export function fieldsProblem(fields: Record<string, string>): { path: string; message: string } | undefined {
  if (validFields(fields)) return undefined
  const err = validFields.errors?.[0]
  return { path: err?.instancePath ?? '', message: firstError(validFields.errors) }
}
const validName = compile(Name)

const Auth0Line = Type.Object({
  email: Type.String(),
  email_verified: Type.Optional(Type.Boolean()),
  name: Type.Optional(Type.String()),
  given_name: Type.Optional(Type.String()),
  family_name: Type.Optional(Type.String()),
  blocked: Type.Optional(Type.Boolean()),
  user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  password_hash: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
  custom_password_hash: Type.Optional(Type.Object({}, { additionalProperties: true })),
  app_metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
  user_metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
  public_metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
  private_metadata: Type.Optional(Type.Object({}, { additionalProperties: true }))
})
const validAuth0 = compile(Auth0Line)

const FirebaseLine = Type.Object({
  localId: Type.String({ minLength: 1, maxLength: 255 }),
  email: Type.Optional(Type.String()),
  emailVerified: Type.Optional(Type.Boolean()),
  displayName: Type.Optional(Type.String()),
  passwordHash: Type.Optional(Type.String({ maxLength: 1024 })),
  salt: Type.Optional(Type.String({ maxLength: 1024 })),
  disabled: Type.Optional(Type.Boolean()),
  createdAt: Type.Optional(Type.Union([Type.String({ pattern: '^[0-9]{1,15}$' }), Type.Integer({ minimum: 0 })]))
})
const validFirebase = compile(FirebaseLine)

/** The first validation error, as a report reads it: where, and what. */
function firstError(errors: ErrorObject[] | null | undefined): string {
  const err = errors?.[0]
  if (!err) return 'is not a valid record'
  const where = err.instancePath || '/'
  if (err.keyword === 'additionalProperties') return `${where}: has an unknown field ${String((err.params as { additionalProperty?: string }).additionalProperty)}`
  return `${where}: ${err.message ?? 'is invalid'}`
}

function parseJson(text: string): unknown {
  let value: unknown
  try {
    value = JSON.parse(text) as unknown
  } catch (err) {
    throw new LineError('INVALID_LINE', `Not JSON: ${(err as Error).message}`)
  }
  if (holdsLoneSurrogate(text, value)) throw new LineError('INVALID_LINE', 'A string of the line holds a lone UTF-16 surrogate (an unpaired \\ud800 to \\udfff)')
  // As the API's JSON bodies: a key `__proto__`, or `constructor` holding `prototype`, is refused, not dropped.
  if (value !== null && typeof value === 'object') {
    try {
      sjson.scan(value, { protoAction: 'error', constructorAction: 'error' })
    } catch {
      throw new LineError('INVALID_LINE', 'The line holds a key __proto__, or constructor with prototype, which no record may hold')
    }
  }
  return value
}

/** A password hash given as text, or UNSUPPORTED_HASH for the line. */
function hashOf(read: () => string, email: string | null, externalId: string | null): string {
  try {
    return read()
  } catch (err) {
    if (err instanceof DomainError) throw new LineError('UNSUPPORTED_HASH', err.message, email, externalId)
    throw err
  }
}

/** The addresses of a line: at least one, none twice, exactly one primary (the first, when none is marked). */
function addresses(
  given: Array<{ address: string; verified?: boolean; primary?: boolean }>, externalId: string | null
): Incoming['emails'] {
  const first = given[0]?.address ?? null
  const seen = new Set<string>()
  for (const { address } of given) {
    if (!isAddress(address)) throw new LineError('VALIDATION_FAILED', `${String(address)} is not an e-mail address`, first, externalId)
    const key = foldedKey(address)
    if (seen.has(key)) throw new LineError('VALIDATION_FAILED', `${address} is given twice`, first, externalId)
    seen.add(key)
  }
  const primaries = given.filter((e) => e.primary === true).length
  if (primaries > 1) throw new LineError('VALIDATION_FAILED', 'More than one address is marked primary', first, externalId)
  return given.map((e, i) => ({ address: e.address, verified: e.verified === true, primary: primaries === 0 ? i === 0 : e.primary === true }))
}

function nameOf(name: string | undefined, email: string | null, externalId: string | null): string | null {
  const trimmed = name?.trim()
  if (!trimmed) return null
  if (!validName(trimmed)) throw new LineError('VALIDATION_FAILED', '/name: must be 1 to 200 characters, without control characters', email, externalId)
  return trimmed
}

/** How far ahead of this clock a creation time may be: the clock of the instance that exported it may run ahead. */
const CLOCK_SKEW_MS = 24 * 3600 * 1000

function timeOf(value: string | number | undefined, field: string, email: string | null, externalId: string | null): number | null {
  if (value === undefined) return null
  const at = typeof value === 'number' ? value : /^[0-9]+$/.test(value) ? Number(value) : Date.parse(value)
  if (!Number.isFinite(at) || at > 8_640_000_000_000_000) throw new LineError('VALIDATION_FAILED', `/${field}: is not a time`, email, externalId)
  if (at < 0) throw new LineError('VALIDATION_FAILED', `/${field}: is before 1970, when no account was made`, email, externalId)
  if (at > Date.now() + CLOCK_SKEW_MS) throw new LineError('VALIDATION_FAILED', `/${field}: is in the future`, email, externalId)
  return at
}

function roster(record: unknown, maxBytes: number): Incoming {
  if (!validRoster(record)) throw new LineError('VALIDATION_FAILED', firstError(validRoster.errors))
  const line = record as ImportLine
  const externalId = line.external_id ?? null
  if (line.emails && line.email) throw new LineError('VALIDATION_FAILED', '/email: give emails or email, not both', line.email, externalId)
  const given = line.emails ?? (line.email ? [{ address: line.email, verified: line.email_verified === true, primary: true }] : [])
  if (given.length === 0) throw new LineError('VALIDATION_FAILED', '/emails: at least one address is required', null, externalId)
  const emails = addresses(given, externalId)
  const primary = emails.find((e) => e.primary)!.address
  const metadata = checkMetadata(line.metadata ?? {}, maxBytes, primary, externalId)
  return {
    externalId,
    name: nameOf(line.name, primary, externalId),
    emails,
    passwordHash: line.password_hash ? hashOf(() => parsePasswordHash(line.password_hash!), primary, externalId) : null,
    status: line.status ?? null,
    role: line.role ?? null,
    createdAt: timeOf(line.created_at, 'created_at', primary, externalId),
    metadata
  }
}

function auth0(record: unknown, maxBytes: number): Incoming {
  if (!validAuth0(record)) throw new LineError('VALIDATION_FAILED', firstError(validAuth0.errors))
  const line = record as typeof Auth0Line.static
  const externalId = line.user_id ?? null
  const emails = addresses([{ address: line.email, verified: line.email_verified === true, primary: true }], externalId)
  // Auth0's app_metadata is the app's own (private), its user_metadata the user's (unsafe); the contract's
  // public_metadata and private_metadata are taken too, private_metadata's keys over app_metadata's.
  const privately = line.app_metadata || line.private_metadata ? { ...line.app_metadata, ...line.private_metadata } : undefined
  const metadata = checkMetadata({ public: line.public_metadata, private: privately, unsafe: line.user_metadata }, maxBytes, line.email, externalId)
  if (line.password_hash && line.custom_password_hash) {
    throw new LineError('VALIDATION_FAILED', 'give password_hash or custom_password_hash, not both', line.email, externalId)
  }
  const joined = [line.given_name, line.family_name].filter((part) => part?.trim()).join(' ')
  return {
    externalId,
    name: nameOf(line.name ?? (joined || undefined), line.email, externalId),
    emails,
    passwordHash: line.password_hash
      ? hashOf(() => parsePasswordHash(line.password_hash!), line.email, externalId)
      : line.custom_password_hash ? hashOf(() => fromAuth0Custom(line.custom_password_hash), line.email, externalId) : null,
    status: line.blocked === undefined ? null : line.blocked ? 'BANNED' : 'ACTIVE',
    role: null,
    createdAt: null,
    metadata
  }
}

function firebase(record: unknown, parameters: FirebaseParameters | null): Incoming {
  if (!validFirebase(record)) throw new LineError('VALIDATION_FAILED', firstError(validFirebase.errors))
  const line = record as typeof FirebaseLine.static
  const externalId = line.localId
  if (!line.email) throw new LineError('VALIDATION_FAILED', '/email: a user without an address cannot be imported', null, externalId)
  const emails = addresses([{ address: line.email, verified: line.emailVerified === true, primary: true }], externalId)
  let passwordHash: string | null = null
  if (line.passwordHash) {
    if (!parameters) throw new LineError('UNSUPPORTED_HASH', 'The user has a Firebase password hash, and the import was not given the project\'s hash parameters', line.email, externalId)
    const hash = line.passwordHash
    passwordHash = hashOf(() => fromFirebase({ passwordHash: hash, salt: line.salt ?? '' }, parameters), line.email, externalId)
  }
  return {
    externalId,
    name: nameOf(line.displayName, line.email, externalId),
    emails,
    passwordHash,
    status: line.disabled === undefined ? null : line.disabled ? 'BANNED' : 'ACTIVE',
    role: null,
    createdAt: timeOf(line.createdAt, 'createdAt', line.email, externalId),
    metadata: {}
  }
}

/** A record of a file in `format` as the user it brings, or LineError; `metadataMaxBytes` is METADATA_MAX_BYTES. */
export function readRecord(text: string, format: ImportFormat, parameters: FirebaseParameters | null, metadataMaxBytes = 8192): Incoming {
  try {
    return readAs(text, format, parameters, metadataMaxBytes)
  } catch (err) {
    if (err instanceof LineError) throw err
    // A record no rule foresaw fails its line, never the import.
    throw new LineError('INVALID_LINE', `The record could not be read: ${(err as Error).message}`)
  }
}

function readAs(text: string, format: ImportFormat, parameters: FirebaseParameters | null, maxBytes: number): Incoming {
  const record = parseJson(text)
  if (typeof record !== 'object' || record === null || Array.isArray(record)) throw new LineError('INVALID_LINE', 'The record is not a JSON object')
  try {
    if (format === 'auth0') return auth0(record, maxBytes)
    if (format === 'firebase') return firebase(record, parameters)
    return roster(record, maxBytes)
  } catch (err) {
    if (err instanceof LineError && err.email === null && err.externalId === null) {
      // Name the line's user in the report when it can be read at all.
      const loose = record as Record<string, unknown>
      const email = typeof loose.email === 'string' ? loose.email : null
      const ext = [loose.external_id, loose.user_id, loose.localId].find((v): v is string => typeof v === 'string')
      throw new LineError(err.code, err.message, email?.slice(0, 254) ?? null, ext?.slice(0, 255) ?? null)
    }
    throw err
  }
}
