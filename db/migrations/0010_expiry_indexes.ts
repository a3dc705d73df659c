import type { Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Expired sessions, access tokens and refresh tokens are purged in the background in small batches (sessions/
// purge.ts), found by their expiry: an index each, so that a purge reads what it deletes and nothing else.

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('sessions_expires_idx').on('sessions').column('expires_at').execute()
  await db.schema.createIndex('tokens_expires_idx').on('tokens').column('expires_at').execute()
  await db.schema.createIndex('refresh_tokens_expires_idx').on('refresh_tokens').column('expires_at').execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('refresh_tokens_expires_idx').on('refresh_tokens').execute()
  await db.schema.dropIndex('tokens_expires_idx').on('tokens').execute()
  await db.schema.dropIndex('sessions_expires_idx').on('sessions').execute()
}
