import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { PROJECT_DIR } from '../common/project.js'

/** The service's own version (package.json), in sources and in the build alike. */
export function serviceVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(join(PROJECT_DIR, 'package.json'), 'utf8')) as { name?: string; version?: string }
    if (pkg.name === 'roster' && pkg.version) return pkg.version
  } catch {
    // no package.json beside the code (an image that left it out)
  }
  return '0.0.0'
}

/** The document's description: what every client needs to know before its first call, as short guides. */
export const GUIDE = `Users and their e-mail addresses, for mobile apps and generated SDKs.

## Authentication and refresh
\`POST /auth/tokens\` with \`email\` and \`password\` starts a session: a short-lived access token (send it as
\`Authorization: Bearer …\`) and a single-use \`refresh_token\`. Before the access token expires, send
\`grant_type=refresh_token\` with the refresh token for a new pair; store the new refresh token before using it (a
refresh token presented twice ends its session: \`REFRESH_TOKEN_REUSED\`). A refusal of an authenticated caller has
the code \`FORBIDDEN\` and \`WWW-Authenticate: … error="insufficient_scope"\`: do not refresh the token for it.

## Paging
Collections answer \`{ href, items, next }\`. Follow \`next\` (also sent as \`Link: <…>; rel="next"\`) until it is
null; \`limit\` (1–200, default 50) sets the page size. Operations that page carry an \`x-pagination\` extension.

## Errors
Every error is \`application/problem+json\` (RFC 9457) with a machine-readable \`code\` (the \`ErrorCode\` enum);
validation failures list each field in \`errors\`. Switch on \`code\`, not on the status or the text.

## Request ids
Every answer carries \`X-Request-Id\`: the one you sent, when it is 1–128 of \`A-Z a-z 0-9 . _ : -\`, otherwise the
service's own. Problem bodies repeat it as \`request_id\`, and the service's log has it on every line.

## Retrying safely
Send \`Idempotency-Key: <a UUID v4>\` on POSTs that create or send: a retry with the same key and body within 24
hours gets the first answer again (\`Idempotent-Replayed: true\`) and nothing is done twice. Rate-limited answers
carry \`RateLimit-Policy\` and \`RateLimit\`; a 429 carries \`Retry-After\`.

## Conditional requests
Answers carry an \`ETag\`. Send it back in \`If-None-Match\` on reads (304 when unchanged) and in \`If-Match\` on
writes (412 \`PRECONDITION_FAILED\` when someone changed the resource meanwhile, and nothing is written).

## Versioning
The document's \`info.version\` is the service's. Within a major version, changes are additive only: new
operations, new optional request fields, new response fields, new error codes. Clients must ignore response fields
they do not know and treat an unknown \`code\` by its status.`
