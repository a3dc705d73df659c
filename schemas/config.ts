import { Type, type Static } from '@sinclair/typebox'

const Bool = (def: boolean, description: string) => Type.Boolean({ default: def, description })
const Int = (min: number, max: number, def: number, description: string) =>
  Type.Integer({ minimum: min, maximum: max, default: def, description })

/** Every environment variable the service reads. The loader converts strings, applies defaults and rejects the rest. */
export const Config = Type.Object(
  {
    PORT: Int(0, 65535, 3000, 'TCP port to listen on'),
    HOST: Type.String({ default: '127.0.0.1', minLength: 1, description: 'Interface to listen on' }),
    METRICS_PORT: Int(0, 65535, 9464, 'Port of GET /metrics (Prometheus), on HOST, never the API\'s port; 0 turns it off'),
    DATABASE_URL: Type.Optional(Type.String({
      pattern: '^(mysql://.+|sqlite:.+)$',
      description: 'mysql://user:pass@host:3306/db, sqlite:///abs/path, sqlite:relative/path or sqlite::memory:; unset: sqlite:./data/roster.sqlite'
    })),
    PUBLIC_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s/?#]+(/[^\\s?#]*)?$', description: 'Makes every href absolute' })),
    ADMIN_EMAIL: Type.Optional(Type.String({
      pattern: '^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$', maxLength: 254, description: 'With ADMIN_PASSWORD: at start, creates this admin if no user has the address'
    })),
    ADMIN_PASSWORD: Type.Optional(Type.String({ minLength: 8, maxLength: 256, description: 'The password of the admin ADMIN_EMAIL creates' })),
    SIGNUP_OPEN: Bool(true, 'Anyone may POST /users; when false only admins may'),
    REQUIRE_EMAIL: Bool(true, 'Refuse to remove the last address of a user'),
    MAX_EMAILS_PER_USER: Int(1, 1000, 10, 'Addresses a user may hold'),
    ACCESS_TOKEN_TTL_SECONDS: Int(1, 31_536_000, 900, 'Lifetime of an access token'),
    TOKEN_TTL_SECONDS: Type.Optional(Type.Integer({ minimum: 1, maximum: 31_536_000, description: 'The old name of ACCESS_TOKEN_TTL_SECONDS' })),
    REFRESH_TOKEN_TTL_SECONDS: Int(1, 31_536_000, 2_592_000, 'A session ends this long after its last refresh'),
    SESSION_MAX_AGE_SECONDS: Int(1, 315_360_000, 7_776_000, 'A session ends this long after its login, refreshed or not'),
    MAX_SESSIONS_PER_USER: Int(1, 10_000, 100, 'Sessions a user may hold; a new login past it ends the oldest'),
    VERIFICATION_TTL_SECONDS: Int(1, 31_536_000, 86_400, 'Lifetime of an address verification token'),
    VERIFICATION_RESEND_SECONDS: Int(1, 86_400, 60, 'Least time between two verification mails to one address of a user, whatever causes them'),
    PASSWORD_RESET_TTL_SECONDS: Int(1, 31_536_000, 3600, 'Lifetime of a password reset token'),
    MAIL_MAX_PER_CLIENT: Int(1, 100_000, 20, 'Requests that cause mail (sign-ups, address changes, resends, password resets) per client address per LOGIN_WINDOW_SECONDS before 429; an admin\'s are not counted'),
    UNVERIFIED_CLAIM_SECONDS: Int(1, 315_360_000, 604_800, 'An address left unverified this long after it was set may be taken by another user'),
    EVENT_RETENTION_SECONDS: Int(1, 315_360_000, 2_592_000, 'Events are kept this long, then purged'),
    PURGE_INTERVAL_SECONDS: Int(1, 86_400, 60, 'How often expired sessions and tokens, idempotency keys and events past EVENT_RETENTION_SECONDS are purged, in batches'),
    EMAIL_CODE_TTL_SECONDS: Int(1, 86_400, 600, 'A 6-digit code mailed beside a token (or alone, to sign in) lives this long, never longer than its token'),
    EMAIL_REVERT_TTL_SECONDS: Int(1, 2_592_000, 604_800, 'A former primary address may take a change of primary back this long: the token and the 6-digit code of its mail live this long'),
    EMAIL_CODE_LOGIN: Bool(true, 'Sign-in by e-mail code (POST /auth/email-codes, grant_type=email_code)'),
    REAUTH_MAX_AGE_SECONDS: Int(1, 31_536_000, 600, 'A user deleting itself must hold a session signed in (by password or e-mail code) less than this long ago'),
    WEBHOOK_TIMEOUT_MS: Int(100, 600_000, 10_000, 'A webhook delivery not answered 2xx within this is retried'),
    WEBHOOK_RETRY_BASE_SECONDS: Int(1, 86_400, 5, 'The first retry of a webhook delivery comes after about this long; each further one doubles'),
    WEBHOOK_RETRY_MAX_SECONDS: Int(1, 604_800, 3600, 'The longest wait between two attempts of a webhook delivery'),
    WEBHOOK_MAX_AGE_SECONDS: Int(1, 31_536_000, 259_200, 'A webhook delivery still failing this long after its event is given up (failed)'),
    WEBHOOK_DISABLE_AFTER_SECONDS: Int(1, 31_536_000, 432_000, 'A webhook all of whose deliveries have failed this long is disabled'),
    WEBHOOK_SECRET_OVERLAP_SECONDS: Int(1, 31_536_000, 86_400, 'After a secret rotation, the former secret keeps signing beside the new one this long'),
    WEBHOOK_ALLOW_HTTP: Bool(false, 'Accept http:// webhook URLs (https:// only when false)'),
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: Bool(false, 'Accept webhook URLs on loopback, private and link-local addresses (refused when false)'),
    SMTP_URL: Type.Optional(Type.String({ pattern: '^smtps?://[^\\s]+$', description: 'smtp://user:pass@host:587 or smtps://…; unset: mail is written to the log' })),
    SMTP_CA_FILE: Type.Optional(Type.String({ minLength: 1, description: 'PEM file of the CA(s) that sign the SMTP server\'s certificate, trusted instead of the system\'s (a private relay)' })),
    MAIL_FROM: Type.String({ default: 'Roster <no-reply@roster.invalid>', minLength: 3, maxLength: 320, pattern: '@', description: 'Sender of every mail' }),
    APP_LINK_TEMPLATE: Type.Optional(Type.String({ pattern: '\\{token\\}', maxLength: 1000, description: 'A link put in mail, {token} replaced by the token (e.g. https://app.example.com/verify?token={token})' })),
    CORS_ORIGINS: Type.Optional(Type.String({ minLength: 1, description: 'Comma-separated origins allowed by CORS (https://console.example.com), or *; unset: CORS is off' })),
    FORBIDDEN_STATUS: Type.Union([Type.Literal(401), Type.Literal(403)], {
      default: 401, description: 'Status of an authenticated caller\'s refusal: 401 (version 1\'s) or 403; the code is FORBIDDEN either way'
    }),
    OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$', description: 'OpenTelemetry: traces are sent to this OTLP/HTTP endpoint (its /v1/traces), the standard OTEL_* variables apply; unset: no tracing, at no cost' })),
    OTEL_SERVICE_NAME: Type.String({ default: 'roster', minLength: 1, maxLength: 200, description: 'OpenTelemetry: the service.name of the traces' }),
    LOG_LEVEL: Type.Union(
      ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
      { default: 'info', description: 'Least level of the JSON log lines on stdout; info writes one line per request' }
    ),
    DB_POOL_SIZE: Int(1, 500, 10, 'MySQL connections in the pool'),
    DB_QUEUE_LIMIT: Int(1, 100_000, 1000, 'Requests that may wait for a MySQL connection before 503'),
    DB_TIMEOUT_MS: Int(100, 600_000, 2000, 'MySQL: deadline of one round trip, the wait for a connection included, before 503'),
    MIGRATE_ON_START: Bool(true, 'Apply pending migrations when the service starts'),
    BODY_LIMIT: Int(1024, 1_048_576, 16_384, 'Largest accepted request body in bytes'),
    IMPORT_MAX_BYTES: Int(1024, 68_719_476_736, 1_073_741_824, 'Largest file POST /imports accepts, in bytes; read as a stream, never held in memory'),
    METADATA_MAX_BYTES: Int(2, 1_048_576, 8192, 'Largest part of a user\'s metadata (public, private, unsafe), in bytes of compact JSON; a larger one is 400 METADATA_TOO_LARGE'),
    ACCOUNT_DELETION_GRACE_SECONDS: Int(0, 31_536_000, 0, 'A deletion waits this long, the user signed out and hidden from all but admins, who may restore it; 0: deletion is immediate'),
    IMPORT_LEASE_SECONDS: Int(1, 3600, 30, 'An instance working on an import renews its hold on it with each batch; one stopped for this long is taken over by another'),
    TRUST_PROXY: Type.Optional(Type.String({ minLength: 1, description: 'Address or CIDR list of the reverse proxy' })),
    CLIENT_IPV6_PREFIX: Int(1, 128, 64, 'IPv6 clients are counted by this prefix in every per-client limit (a /64 is one subscriber\'s network)'),
    RATE_LIMIT_MAX: Int(1, 100_000_000, 1200, 'Requests per caller (user, else client address) per window'),
    RATE_LIMIT_WINDOW_SECONDS: Int(1, 86_400, 60, 'Window of the general rate limit'),
    RATE_LIMIT_REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://.+', description: 'Share rate limits and login throttling through Redis' })),
    REDIS_KEY_PREFIX: Type.String({ default: 'roster:', minLength: 1, maxLength: 64, description: 'Prefix of every Redis key' }),
    LOGIN_MAX_FAILURES: Int(1, 100_000, 5, 'Failed password checks per account and client address per window before 429'),
    LOGIN_MAX_FAILURES_PER_CLIENT: Int(1, 100_000, 30, 'Failed password checks per client address per window before 429'),
    LOGIN_MAX_FAILURES_PER_ACCOUNT: Int(1, 1_000_000, 100, 'Failed password checks per account from all clients per window before 429'),
    PASSWORD_HASH_MEMORY_KIB: Int(1024, 1_048_576, 19_456, 'Memory of one argon2id password hash, in KiB (OWASP: 19456 with 2 passes); lower only for tests'),
    PASSWORD_HASH_PASSES: Int(1, 10, 2, 'Passes of one argon2id password hash (OWASP: 2 with 19456 KiB); lower only for tests'),
    LOGIN_WINDOW_SECONDS: Int(1, 86_400, 900, 'Window of the failed-login counters'),
    MAX_EVENT_LOOP_DELAY_MS: Int(0, 60_000, 1000, 'Answer 503 while the event loop lags more than this (0: never)')
  },
  { additionalProperties: false }
)
export type Config = Static<typeof Config>
export type ConfigKey = keyof Config
