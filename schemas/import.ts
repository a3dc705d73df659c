import { Type, type Static } from '@sinclair/typebox'
import { Address, Cursor, Href, Id, Limit, Timestamp } from './common.js'
import { ref, stringEnum } from './ref.js'
import { UserRole, UserStatus } from './user.js'

export const IMPORT_FORMATS = ['roster', 'auth0', 'firebase'] as const
export const IMPORT_STATUSES = ['pending', 'running', 'succeeded', 'failed'] as const
export const IMPORT_CONFLICTS = ['skip', 'update'] as const

export const ImportFormat = stringEnum(IMPORT_FORMATS, {
  $id: 'ImportFormat', description: 'roster: NDJSON, one user a line, as an export writes it; auth0: Auth0\'s bulk import array; firebase: what `firebase auth:export` writes'
})
export const ImportStatus = stringEnum(IMPORT_STATUSES, {
  $id: 'ImportStatus', description: 'pending: received, waiting for an instance; running; succeeded: every line done (some may have failed); failed: the file as a whole could not be read'
})

export const Import = Type.Object(
  {
    id: Id,
    href: Href,
    status: ref(ImportStatus),
    format: ref(ImportFormat),
    dry_run: Type.Boolean({ description: 'Every line checked, nothing changed' }),
    on_conflict: stringEnum(IMPORT_CONFLICTS, { description: 'What a line does to a user already here: skip it, or update it' }),
    created_at: Timestamp,
    started_at: Type.Union([Timestamp, Type.Null()]),
    finished_at: Type.Union([Timestamp, Type.Null()]),
    lines: Type.Integer({ minimum: 0, description: 'Lines (or array elements) in the file' }),
    processed: Type.Integer({ minimum: 0, description: 'Lines done so far: a progress bar reads it' }),
    created: Type.Integer({ minimum: 0 }),
    updated: Type.Integer({ minimum: 0 }),
    skipped: Type.Integer({ minimum: 0 }),
    failed: Type.Integer({ minimum: 0, description: 'Lines that failed: see `errors`' }),
    detail: Type.Union([Type.String(), Type.Null()], { description: 'Why the file could not be read (status failed); null otherwise' }),
    errors: Href
  },
  {
    $id: 'Import', description: 'A file of users brought in, worked through in the background',
    examples: [{ id: 3, href: '/imports/3', status: 'running', format: 'auth0', dry_run: false, on_conflict: 'skip', created_at: '2026-11-27T10:00:00.000Z', started_at: '2026-11-27T10:00:01.000Z', finished_at: null, lines: 1000, processed: 400, created: 398, updated: 0, skipped: 1, failed: 1, detail: null, errors: '/imports/3/errors' }]
  }
)
export type Import = Static<typeof Import>

export const ImportCollection = Type.Object(
  { href: Href, items: Type.Array(ref(Import)), next: Type.Union([Type.String(), Type.Null()]) },
  { $id: 'ImportCollection', description: 'A page of imports, newest first' }
)

export const ImportLineError = Type.Object(
  {
    line: Type.Integer({ minimum: 1, description: 'The line of the file (for a JSON array, the element), from 1' }),
    code: Type.String({ description: 'VALIDATION_FAILED, INVALID_LINE, LINE_TOO_LONG, EMAIL_TAKEN, EXTERNAL_ID_TAKEN, UNSUPPORTED_HASH, CONFLICT' }),
    detail: Type.String(),
    email: Type.Union([Type.String(), Type.Null()]),
    external_id: Type.Union([Type.String(), Type.Null()])
  },
  { $id: 'ImportLineError', description: 'A line that failed, and why' }
)
export type ImportLineError = Static<typeof ImportLineError>

export const ImportErrorCollection = Type.Object(
  { href: Href, items: Type.Array(ref(ImportLineError)), next: Type.Union([Type.String(), Type.Null()]) },
  { $id: 'ImportErrorCollection', description: 'The lines that failed, in line order' }
)

const Bool = Type.Union([Type.Boolean(), Type.Literal('true'), Type.Literal('false')])

/** How an import is asked for: query parameters, or multipart fields before the `file` part. */
export const ImportQuery = Type.Object(
  {
    format: Type.Optional(stringEnum(IMPORT_FORMATS, { description: 'roster (the default), auth0 or firebase' })),
    dry_run: Type.Optional(Type.Boolean({ description: 'true: every line is checked and counted, and nothing is changed (false by default)' })),
    on_conflict: Type.Optional(stringEnum(IMPORT_CONFLICTS, { description: 'skip (the default) or update' })),
    firebase_signer_key: Type.Optional(Type.String({ maxLength: 200, description: 'Firebase: the project\'s base64_signer_key' })),
    firebase_salt_separator: Type.Optional(Type.String({ maxLength: 100, description: 'Firebase: base64_salt_separator' })),
    firebase_rounds: Type.Optional(Type.Integer({ minimum: 1, maximum: 64, description: 'Firebase: rounds' })),
    firebase_mem_cost: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, description: 'Firebase: mem_cost' }))
  },
  { additionalProperties: false }
)
export type ImportQuery = Static<typeof ImportQuery>
/** The same parameters as multipart fields: text. */
export const ImportFields = Type.Object(
  {
    format: Type.Optional(stringEnum(IMPORT_FORMATS)),
    dry_run: Type.Optional(Bool),
    on_conflict: Type.Optional(stringEnum(IMPORT_CONFLICTS)),
    firebase_signer_key: Type.Optional(Type.String({ maxLength: 200 })),
    firebase_salt_separator: Type.Optional(Type.String({ maxLength: 100 })),
    firebase_rounds: Type.Optional(Type.String({ pattern: '^[0-9]{1,2}$' })),
    firebase_mem_cost: Type.Optional(Type.String({ pattern: '^[0-9]{1,2}$' }))
  },
  { additionalProperties: false }
)

export const ImportParams = Type.Object({ import_id: Id }, { additionalProperties: false })
export const ImportErrorQuery = Type.Object({ limit: Limit, cursor: Cursor }, { additionalProperties: false })

/** One address of a line of the `roster` format. */
export const ImportedEmail = Type.Object(
  {
    address: Address,
    verified: Type.Optional(Type.Boolean({ default: false })),
    primary: Type.Optional(Type.Boolean({ default: false }))
  },
  { additionalProperties: false }
)

const MetadataPart = Type.Record(Type.String(), Type.Unknown())

/** A line of the `roster` format: what an export writes, one user. */
export const ImportLine = Type.Object(
  {
    external_id: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 255 }), Type.Null()])),
    name: Type.Optional(Type.String({ maxLength: 200 })),
    emails: Type.Optional(Type.Array(ImportedEmail, { minItems: 1, maxItems: 100 })),
    email: Type.Optional(Address),
    email_verified: Type.Optional(Type.Boolean()),
    password_hash: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 1024 }), Type.Null()])),
    status: Type.Optional(UserStatus),
    role: Type.Optional(UserRole),
    created_at: Type.Optional(Type.String({ format: 'date-time' })),
    metadata: Type.Optional(Type.Object({
      public: Type.Optional(MetadataPart), private: Type.Optional(MetadataPart), unsafe: Type.Optional(MetadataPart)
    }, { additionalProperties: false }))
  },
  { $id: 'ImportLine', additionalProperties: false, description: 'One user of the roster format: one line of an export, and of an import' }
)
export type ImportLine = Static<typeof ImportLine>

export const ExportQuery = Type.Object(
  { include: Type.Optional(Type.Literal('password_hash', { description: 'Each line carries its password hash, as an import reads it back' })) },
  { additionalProperties: false }
)
