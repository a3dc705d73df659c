import type { Generated } from 'kysely'
import type { ActorType, EventType } from '../schemas/event.js'
import type { UserRole, UserStatus } from '../schemas/user.js'

/** Times are stored as integer milliseconds since the epoch on both engines: no time zone or precision drift. */
export interface UsersTable {
  id: Generated<number>
  name: string
  /** Lower-cased name, indexed for case-insensitive exact and prefix search. */
  name_search: string
  /** Argon2id, or the empty string for a user with no password (it signs in by e-mail code or a reset). */
  password_hash: string
  /** When the password was last set after sign-up; null if never. */
  password_set_at: number | null
  /** The user's id in the system it was imported from (or its directory's); unique when set. */
  external_id: string | null
  status: UserStatus
  /** Why the user is banned (`deprovisioned`: by its directory, through SCIM); null when not banned or none given. */
  ban_reason: string | null
  /** When the ban ends by itself; null for a ban without an end. */
  banned_until: number | null
  banned_at: number | null
  /** Who banned it: an actor type (admin, scim) and its id. */
  banned_by_type: string | null
  banned_by_id: number | null
  role: UserRole
  /** When a scheduled deletion becomes final (ACCOUNT_DELETION_GRACE_SECONDS); null when none is scheduled. */
  deletion_scheduled_at: number | null
  /** Bumped by every change to the user's representation; the ETag and If-Match are built on it. */
  version: number
  created_at: number
  updated_at: number
}

export interface EmailsTable {
  id: Generated<number>
  user_id: number
  address: string
  /** Lower-cased address; its unique index makes addresses unique case-insensitively on every engine. */
  address_norm: string
  /** The owner's id while this is the primary address, else null; unique, so a user has at most one primary. */
  primary_user_id: number | null
  version: number
  created_at: number
  updated_at: number
  /** When the owner showed they read mail sent to the address; null while unverified. */
  verified_at: number | null
  /** When the address was last set (added or replaced); null for addresses older than verification itself. */
  claimed_at: number | null
}

/** What a mailed token proves when it comes back; `signin` is a sign-in code (its token is never mailed). */
export type EmailTokenPurpose = 'verify' | 'reset' | 'signin'

export interface EmailTokensTable {
  id: Generated<number>
  /** SHA-256 of the token, hex. */
  token_hash: string
  purpose: EmailTokenPurpose
  /** The address the token was mailed to; the token dies with it. */
  email_id: number
  user_id: number
  created_at: number
  expires_at: number
  /** HMAC-SHA256 of the 6-digit code mailed with the token (keyed: see accounts/codes.ts), hex; null without one. */
  code_hash: string | null
  /** When the code dies: EMAIL_CODE_TTL_SECONDS after it was mailed, never after the token. */
  code_expires_at: number | null
  /** Wrong codes tried against it: at 5 it is dead. */
  code_tries: Generated<number>
}

/** A revert mailed to a former primary address: it makes that address the user's verified primary again. */
export type ImportStatus = 'pending' | 'running' | 'succeeded' | 'failed'
export type ImportFormat = 'roster' | 'auth0' | 'firebase'
export type ImportConflict = 'skip' | 'update'

/** A file of users brought in by POST /imports, and how far its background work has come. */
export interface ImportsTable {
  id: Generated<number>
  status: ImportStatus
  /** 1 once the whole file is staged in import_lines: only then is it worked on. */
  received: number
  format: ImportFormat
  /** 1 or 0. */
  dry_run: number
  on_conflict: ImportConflict
  /** The format's parameters (Firebase's hash parameters), JSON; null when none. */
  parameters: string | null
  /** The admin who started it: the actor of the events it writes. */
  created_by: number | null
  request_id: string | null
  created_at: number
  started_at: number | null
  finished_at: number | null
  /** Lines staged. */
  total_lines: Generated<number>
  /** Lines done, in order: the next batch starts after this one. */
  processed: Generated<number>
  created: Generated<number>
  updated: Generated<number>
  skipped: Generated<number>
  failed: Generated<number>
  /** Why the file as a whole could not be read (status failed). */
  detail: string | null
  lease: string | null
  lease_until: number | null
}

export interface ImportLinesTable {
  import_id: number
  /** 1-based: the line of an NDJSON file, the element of a JSON array. */
  line: number
  body: string
}

export interface ImportErrorsTable {
  id: Generated<number>
  import_id: number
  line: number
  code: string
  detail: string
  email: string | null
  external_id: string | null
}

export interface EmailRevertsTable {
  id: Generated<number>
  user_id: number
  /** The former primary address, as it was written; bound to its text, as its row may be gone. */
  address: string
  address_norm: string
  /** SHA-256 of the token, hex. */
  token_hash: string
  /** HMAC-SHA256 of the 6-digit code (accounts/codes.ts), hex. It lives as long as the token. */
  code_hash: string
  /** Wrong codes tried against it: at 5 the code is dead (the token still works). */
  code_tries: Generated<number>
  created_at: number
  expires_at: number
}

export type OutboxState = 'pending' | 'sent' | 'failed'

/** What the outbox carries: mail, and webhook deliveries. */
export type OutboxKind = 'mail' | 'webhook'

/** One message to deliver, written in the transaction of the change that causes it (src/outbox/). */
export interface OutboxTable {
  id: Generated<number>
  kind: OutboxKind
  /** Mail: the template that renders it (src/mail/templates.ts); a webhook delivery: the event's type. */
  template: string
  /** Mail: the address; a webhook delivery: '' (sent to the webhook's URL as it is at the time). */
  recipient: string
  /** Mail: the template's values, JSON, emptied once sent or given up (no token outlives its mail); a webhook delivery: the event, JSON. */
  data: string
  state: OutboxState
  attempts: number
  created_at: number
  /** When a deliverer may next take it: due now, after a retry delay, or after another instance's lease. */
  next_attempt_at: number
  /** The deliverer run that took it last; only that run may mark it. */
  claim: string | null
  sent_at: number | null
  last_error: string | null
  webhook_id: number | null
  /** The event's public id (`webhook-id`). */
  event_id: string | null
  last_attempt_at: number | null
  /** The status of the receiver's last answer (webhooks); null when it gave none. */
  last_status_code: number | null
}

export interface WebhooksTable {
  id: Generated<number>
  url: string
  /** The event types and families it subscribes to, JSON (`["user.*", "email.verified"]`). */
  events: string
  /** 1 or 0. */
  enabled: number
  description: string
  disabled_reason: string | null
  /** Since when every delivery attempt has failed; null after a success. */
  failing_since: number | null
  /** The delivery run sending to it now (one instance at a time), and until when. */
  lease: string | null
  lease_until: number | null
  created_at: number
  updated_at: number
}

/** A webhook's signing secret (`whsec_…`): every one not yet expired signs each delivery. */
export interface WebhookSecretsTable {
  id: Generated<number>
  webhook_id: number
  secret: string
  created_at: number
  /** When it stops signing: null while it is current, then the overlap after the rotation that replaced it. */
  expires_at: number | null
}

export interface TokensTable {
  id: Generated<number>
  /** SHA-256 of the token, hex. The token itself is never stored. */
  token_hash: string
  user_id: number
  created_at: number
  expires_at: number
  /** The session the token belongs to; null for tokens issued before sessions existed. */
  session_id: number | null
}

export interface SessionsTable {
  id: Generated<number>
  user_id: number
  created_at: number
  /** Set at login and at each refresh. */
  last_used_at: number
  /** When the session ends unless refreshed: the last refresh plus REFRESH_TOKEN_TTL_SECONDS, at most ends_at. */
  expires_at: number
  /** When the session ends whatever happens: the login plus SESSION_MAX_AGE_SECONDS. */
  ends_at: number
  /** The client's User-Agent at login, at most 200 characters. */
  client: string
}

export interface RefreshTokensTable {
  id: Generated<number>
  /** SHA-256 of the refresh token, hex. */
  token_hash: string
  session_id: number
  created_at: number
  expires_at: number
  /** When it was exchanged; a spent token presented again is a replay. */
  used_at: number | null
}

export interface IdempotencyKeysTable {
  id: Generated<number>
  /** SHA-256 of the caller's scope and the key: a key is the caller's own, an anonymous one anybody's. */
  key_hash: string
  /** SHA-256 of the method, the path and the body: the same key with another request is refused. */
  request_hash: string
  /** `running` while the first request is served, `done` once its answer is kept. */
  state: 'running' | 'done'
  status: number | null
  content_type: string | null
  location: string | null
  etag: string | null
  body: string | null
  /** The user the kept answer presents (its href is in the body or the location), dropped with it on deletion. */
  user_id: number | null
  created_at: number
  expires_at: number
}

export interface EventsTable {
  id: Generated<number>
  /** `evt_` and a ULID: the id clients see, and the `webhook-id` of its deliveries. */
  public_id: string
  type: EventType
  /** The user the event is about (kept after the user is deleted). */
  user_id: number | null
  actor_type: ActorType
  actor_id: number | null
  request_id: string | null
  /** The resource as the API presented it after the change (before it, for a removal), JSON. */
  data: string
  /** The changed fields' values before the change, JSON; null for a creation. */
  previous: string | null
  occurred_at: number
  /** The event's place in the feed, given after its transaction committed; null until then. */
  position: number | null
  /** 1 once its user was deleted and its personal values erased (`data` `{}`, `previous` null). */
  erased: Generated<number>
}

/** Deleted users whose events are still being erased, batch by batch (accounts/erasure.ts). */
export interface ErasuresTable {
  user_id: number
  created_at: number
}

/** Counters handed out under a row lock: `events` is the last feed position given. */
export interface EventSequenceTable {
  name: string
  value: number
}

export interface AppSecretsTable {
  name: string
  value: string
}

/** A credential of an identity provider on /scim/v2 (SCIM 2.0): only its hash is kept. */
export interface ScimTokensTable {
  id: Generated<number>
  /** SHA-256 of the token, hex. */
  token_hash: string
  description: string
  /** The admin who made it. */
  created_by: number | null
  created_at: number
  /** Written at most once a minute. */
  last_used_at: number | null
}

/** How many users there are (migration 0018): the sum over the slots; a user's id picks the slot its writes move. */
export interface UserTallyTable {
  slot: number
  users: number
}

/** A user's metadata (users/metadata): each part a JSON object as compact JSON text; no row is three empty parts. */
export interface UserMetadataTable {
  user_id: number
  public: string
  private: string
  unsafe: string
  /** The metadata's own version: its ETag and If-Match (1 for a user without a row). */
  version: number
  updated_at: number
}

export interface Database {
  users: UsersTable
  user_metadata: UserMetadataTable
  scim_tokens: ScimTokensTable
  user_tally: UserTallyTable
  emails: EmailsTable
  tokens: TokensTable
  sessions: SessionsTable
  refresh_tokens: RefreshTokensTable
  email_tokens: EmailTokensTable
  email_reverts: EmailRevertsTable
  imports: ImportsTable
  import_lines: ImportLinesTable
  import_errors: ImportErrorsTable
  outbox: OutboxTable
  webhooks: WebhooksTable
  webhook_secrets: WebhookSecretsTable
  idempotency_keys: IdempotencyKeysTable
  app_secrets: AppSecretsTable
  events: EventsTable
  erasures: ErasuresTable
  event_sequence: EventSequenceTable
}
